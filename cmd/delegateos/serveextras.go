package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/agentcard"
	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/metrics"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/proxy"
	"github.com/delegateos/delegateos/revdist"
	"github.com/delegateos/delegateos/revocation"
	"github.com/delegateos/delegateos/serve"
)

// The extras are an extension of delegateos serve: their flags, the
// signature check as the server's Authorize, and their handlers.
func init() {
	var f *serveExtraFlags
	var x *serveExtras
	serveExtensions = append(serveExtensions, serveExtension{
		flags: func(fs *pflag.FlagSet) { f = declareServeExtraFlags(fs) },
		configure: func(s *serveSetup) error {
			var err error
			if x, err = f.build(s.Policy, s.Revocations, s.KeyFile, s.Gate, s.Log, s.Options.Endpoint); err != nil {
				return err
			}
			if x.sig == nil {
				return nil
			}
			// It verifies every signature (against the token's holder):
			// serve need not verify one itself.
			s.Options.AuthorizeVerifiesSignatures = true
			next, defaultToken := s.Options.Authorize, s.DefaultToken
			s.Options.Authorize = func(r *http.Request, body []byte, sess *serve.Session) error {
				token := defaultToken
				switch {
				case sess != nil && sess.Token != "":
					token = sess.Token
				case sess == nil:
					if b := bearerToken(r.Header.Get("Authorization")); b != "" {
						token = b
					}
				}
				if err := x.authorizeRequest(r, body, token); err != nil {
					return err
				}
				if next != nil {
					return next(r, body, sess)
				}
				return nil
			}
			return nil
		},
		mount: func(s *serveSetup) error {
			x.metrics.WatchServer(s.Server)
			x.metrics.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "delegateos_upstream_notifications_dropped_total",
				Help: "Client notifications (and answers to the upstream's requests) dropped because their session's queue to its --upstream-url server was full.",
			}, func() float64 { return float64(serve.UpstreamNotificationsDropped()) }))
			x.metrics.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "delegateos_upstream_messages_refused_total",
				Help: "Notifications and requests from upstreams not relayed to their clients because their params give a member twice.",
			}, func() float64 { return float64(proxy.UpstreamMessagesRefused()) }))
			x.mount(s.Server.Mux, s.Server.Guard, *f.metricsAt == "", s.Server.Recheck)
			if at := *f.metricsAt; at != "" && at != metricsOff {
				if err := serveMetrics(at, x.metrics, s.Options, s.Log); err != nil {
					return err
				}
			}
			// Polls and pushes for as long as the process serves.
			go func() {
				if err := x.run(context.Background()); err != nil {
					s.Log.Error("revocation distribution stopped", zap.Error(err))
				}
			}()
			return nil
		},
	})
}

// bearerToken is the token of an "Authorization: Bearer" value, or "".
func bearerToken(auth string) string {
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// serveExtraFlags are delegateos serve's flags for what it serves beside
// the MCP endpoint: holder-of-key signatures, revocation distribution, the
// agent card and metrics.
type serveExtraFlags struct {
	requireSig *bool
	sigWindow  *time.Duration
	sigNonces  *int
	sigPerTree *int
	peers      *[]string
	poll       *time.Duration
	publicURL  *string
	metricsAt  *string
	fs         *pflag.FlagSet
}

func declareServeExtraFlags(fs *pflag.FlagSet) *serveExtraFlags {
	return &serveExtraFlags{
		fs:         fs,
		requireSig: fs.Bool("require-signature", false, "holder-of-key: every HTTP request must carry an AVP-Sig v2 signature by the key of its token's current delegatee (see 'delegateos sign-request'; require_signature in the policy)"),
		sigWindow:  fs.Duration("signature-window", avpsig.DefaultWindow, "how far a signature's timestamp may lie behind this server's clock (ahead of it, at most 5s)"),
		sigNonces:  fs.Int("signature-nonces", avpsig.DefaultMaxNonces, "with --require-signature, the most live signature nonces this server holds in memory; past it a signed request is refused (503 signature_busy) rather than a nonce forgotten"),
		sigPerTree: fs.Int("signature-nonces-per-tree", avpsig.DefaultMaxNoncesPerTree, "with --require-signature, the most live signature nonces of one delegation tree (the tokens under one root-issued token, whatever keys they name), in memory or in the shared Redis; past it that tree's signed requests are refused (503 signature_busy)"),
		peers:      fs.StringArray("revocation-peer", nil, "a peer verifier's URL (its revocation endpoint, or its base URL): its list is polled and new revocations are pushed to it (repeatable)"),
		poll:       fs.Duration("revocation-poll", revdist.DefaultInterval, "how often each --revocation-peer is polled"),
		publicURL:  fs.String("public-url", "", "the URL clients reach this server at (https://gate.example.com), for the agent card; default: the request's Host"),
		metricsAt:  fs.String("metrics-listen", "", "serve /metrics on a listener of its own at HOST:PORT (an internal interface, say) instead of beside the MCP endpoint; off serves no metrics"),
	}
}

// serveExtras are the handlers and hooks built from serveExtraFlags.
type serveExtras struct {
	metrics *metrics.Metrics
	dist    *revdist.Distributor // nil without a revocation list
	tokens  *revdist.Tokens
	card    http.Handler // nil without --key
	sig     *avpsig.Verifier
	// verify verifies a token as the gate does before a signature is
	// checked against its holder (and a nonce spent).
	verify func(token string) error
	// holders caches each token string's current delegatee.
	holders sync.Map
	nHolder int64
	mu      sync.Mutex
}

// build makes the extras for a gate whose policy and revocation list (nil
// when the policy has none) are given, and sets the gate's Observer.
// keyFile is the server's key (--key or proxy_key; "" for none), whose
// did:key the agent card publishes.
func (f *serveExtraFlags) build(pol *policy.Policy, revs revocation.Live, keyFile string, g *gate.Gate, log *zap.Logger, mcpPath string) (*serveExtras, error) {
	x := &serveExtras{metrics: metrics.New(), tokens: &revdist.Tokens{}}
	version, commit := buildVersion()
	if commit == "" {
		commit = "unknown"
	}
	x.metrics.BuildInfo(version, commit)
	x.metrics.Tools(pol)
	g.Observer = gateObservers{x.metrics, tokenRecorder{x.tokens}}
	if *f.requireSig || pol.RequireSignature {
		if *f.sigWindow < time.Second {
			return nil, usagef("--signature-window must be at least 1s")
		}
		if *f.sigNonces < 1 || *f.sigPerTree < 1 {
			return nil, usagef("--signature-nonces and --signature-nonces-per-tree must be at least 1")
		}
		// A tree bound at or above the whole memory bounds nothing: one
		// tree could take every nonce. Given only --signature-nonces, the
		// tree bound follows it (a tenth, as by default); given both, they
		// must say so.
		if *f.sigPerTree >= *f.sigNonces {
			if f.fs.Changed("signature-nonces-per-tree") {
				return nil, usagef("--signature-nonces-per-tree (%d) must be below --signature-nonces (%d), or one delegation tree could take every nonce; a tenth is the default", *f.sigPerTree, *f.sigNonces)
			}
			*f.sigPerTree = max(1, *f.sigNonces/10)
		}
		x.sig = &avpsig.Verifier{Window: *f.sigWindow, MaxNonces: *f.sigNonces, MaxNoncesPerTree: *f.sigPerTree}
		if err := shareNonces(x.sig, pol, log); err != nil {
			return nil, err
		}
		x.verify = func(token string) error {
			if g.Verifier == nil {
				return errors.New("no trusted roots to verify it against")
			}
			_, err := g.Verifier.VerifyChain(token, time.Now())
			return err
		}
	}
	for _, p := range *f.peers {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("--revocation-peer %q is not an http or https URL", p)
		}
	}
	file, _ := revs.(*revocation.File)
	if revs != nil && file == nil && len(*f.peers) > 0 {
		return nil, fixf("--revocation-peer needs a revocation list file: a Redis list (%s) is already shared by every server that uses it", redisconn.Redact(pol.RevocationList))
	}
	if file != nil {
		roots, err := revdist.NewPrincipals(pol.Roots...)
		if err != nil {
			return nil, fixf("the trusted roots cannot be used: %v", err)
		}
		sugar := log.Sugar()
		x.dist = &revdist.Distributor{
			Store:     &revdist.FileStore{Path: pol.RevocationList, File: file},
			Authority: revdist.AnyOf{roots, x.tokens},
			Peers:     *f.peers, Interval: *f.poll,
			Logf: func(format string, args ...any) { sugar.Warnf(format, args...) },
		}
		x.metrics.WatchRevocations(func() (int, time.Time) {
			n := file.Len()
			s := x.dist.Stats()
			if len(*f.peers) > 0 {
				return n, s.LastPoll
			}
			return n, s.LastChange
		})
	} else if len(*f.peers) > 0 {
		return nil, fixf("--revocation-peer needs a revocation list to merge into: give --revocations FILE or revocation_list in the policy")
	}
	if keyFile != "" {
		k, err := loadKey(keyFile)
		if err != nil {
			return nil, err
		}
		c := &agentcard.Card{Name: "delegateos gate", Key: k, PublicURL: *f.publicURL, MCPPath: mcpPath,
			AcceptsRevocationPushes: x.dist != nil, RequireSignature: x.sig != nil}
		if x.dist != nil {
			c.RevocationPath = revdist.Path
		}
		if x.card, err = c.Handler(); err != nil {
			return nil, fixf("--public-url: %v", err)
		}
	} else if *f.publicURL != "" {
		return nil, usagef("--public-url is for the agent card, which needs --key")
	}
	return x, nil
}

// mount adds the extras' handlers to mux, each wrapped by guard; metrics
// among them unless they are served elsewhere or not at all. revoked runs
// after a revocation push is taken.
func (x *serveExtras) mount(mux *http.ServeMux, guard func(http.Handler) http.Handler, withMetrics bool, revoked func()) {
	if withMetrics {
		mux.Handle(metrics.Path, guard(x.metrics.Handler()))
	}
	if x.dist != nil {
		dist := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				x.dist.ServeHTTP(w, r)
				return
			}
			sw := &statusWriter{ResponseWriter: w}
			x.dist.ServeHTTP(sw, r)
			if sw.status/100 == 2 {
				// The sessions of the tokens it revokes end now, not at the
				// next recheck (a refused push costs no recheck).
				revoked()
			}
		})
		mux.Handle(revdist.Path, guard(dist))
	}
	if x.card != nil {
		mux.Handle(agentcard.Path, guard(x.card))
	}
}

// run polls the revocation peers and pushes new entries until ctx ends.
func (x *serveExtras) run(ctx context.Context) error {
	if x.dist == nil {
		return nil
	}
	return x.dist.Run(ctx)
}

// maxHolders bounds the cache of token holders.
const maxHolders = 10_000

// checkSignature applies --require-signature to one HTTP request whose
// body has been read: token is the token the gate will decide it with
// (the request's own, else the session's). It returns nil when signatures
// are not required. A request without a token cannot be bound to a holder
// and is refused.
func (x *serveExtras) checkSignature(r *http.Request, body []byte, token string) error {
	if x.sig == nil {
		return nil
	}
	if token == "" {
		return &avpsig.Error{Reason: avpsig.ReasonMissing, Detail: "signatures are required, and a signature is checked against the token's holder: present a token with the request or the session"}
	}
	// Only a token the gate would take names a key worth a nonce: anyone
	// can mint one, under a root of their own, that names their key.
	if err := x.verify(token); err != nil {
		return fmt.Errorf("the token does not verify, so no signature is checked against its holder: %w", err)
	}
	h, err := x.holder(token)
	if err != nil {
		return &avpsig.Error{Reason: avpsig.ReasonWrongKey, Detail: fmt.Sprintf("the token's holder cannot be read: %v", err)}
	}
	return x.sig.VerifyInTree(r, body, h.key, h.tree)
}

// authorizeRequest applies --require-signature to an MCP request over
// HTTP: body is its POST body (nil for GET and DELETE) and sessionToken
// the token its session was created with (for the request that creates
// one, the token it carries in Authorization). The request's own
// _delegateos token, read as the relay reads it, wins over the session's,
// as at the gate. A refusal is a sigRefusal (401).
func (x *serveExtras) authorizeRequest(r *http.Request, body []byte, sessionToken string) error {
	if x.sig == nil {
		return nil
	}
	token := sessionToken
	if len(body) > 0 {
		if bindsToken(body) {
			return errBindUnsigned
		}
		own, err := proxy.RequestToken(body)
		if err != nil {
			return sigRefusal{&avpsig.Error{Reason: avpsig.ReasonMalformed, Detail: "the request cannot be read to find its token: " + err.Error()}}
		}
		if own != "" {
			token = own
		}
	}
	if err := x.checkSignature(r, body, token); err != nil {
		var e *avpsig.Error
		if errors.As(err, &e) {
			return sigRefusal{e}
		}
		return err
	}
	return nil
}

// errBindUnsigned refuses delegateos/delegate when signatures are
// required: the calls that follow it would run under the token it binds
// while their signatures are checked against the session's own token.
var errBindUnsigned = errors.New("delegateos/delegate binds a token to the session, which a server that requires signatures does not do: send the token with each call in params._delegateos, signed by its holder")

// bindsToken reports whether an MCP request body, read as the relay will
// read it, is delegateos/delegate (a request or a notification). A body
// the relay cannot read is refused by the server before it is relayed.
func bindsToken(body []byte) bool {
	var frame bytes.Buffer
	if err := json.Compact(&frame, body); err != nil {
		return false
	}
	m, err := proxy.ReadClientMessage(frame.Bytes())
	return err == nil && m.Method == gate.MethodDelegate
}

// sigRefusal is a refused signature, answered with the reason: 401 for a
// signature that does not hold, 503 when the server cannot decide now (its
// nonce memory is full, or the Redis it keeps nonces in does not answer),
// which says to retry rather than that the credentials are wrong.
type sigRefusal struct{ err *avpsig.Error }

func (s sigRefusal) Error() string { return s.err.Error() }
func (s sigRefusal) Unwrap() error { return s.err }

// StatusCode is the HTTP status of the refusal.
func (s sigRefusal) StatusCode() int {
	switch s.err.Reason {
	case avpsig.ReasonBusy, avpsig.ReasonUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusUnauthorized
}

// tokenHolder is who holds a token, as a signature is checked against it.
type tokenHolder struct {
	// key is the current delegatee.
	key string
	// tree is the revocation ID of the token's authority block: its
	// delegation tree, which only a root's key can make more of, and which
	// its signers' nonces are counted against.
	tree string
}

// holder returns the current delegatee a token names and its tree. It is
// not verified here: the gate verifies the token itself.
func (x *serveExtras) holder(token string) (tokenHolder, error) {
	if h, ok := x.holders.Load(token); ok {
		return h.(tokenHolder), nil
	}
	tok, err := dct.ParseInput(token)
	if err != nil {
		return tokenHolder{}, err
	}
	h := tokenHolder{key: tok.Delegatee(), tree: tok.RevocationIDs()[0]}
	if _, err := identity.PublicKey(h.key); err != nil {
		return tokenHolder{}, err
	}
	x.mu.Lock()
	if x.nHolder >= maxHolders {
		x.holders.Clear()
		x.nHolder = 0
	}
	x.nHolder++
	x.mu.Unlock()
	x.holders.Store(token, h)
	return h, nil
}

// gateObservers tells each observer of every decision.
type gateObservers []gate.Observer

func (o gateObservers) Decided(req *gate.CallRequest, d *gate.Decision) {
	for _, x := range o {
		x.Decided(req, d)
	}
}

func (o gateObservers) Settled(c gate.SettledCall) {
	for _, x := range o {
		x.Settled(c)
	}
}

// tokenRecorder records the tokens of allowed requests, whose signers may
// then revoke their blocks through revocation distribution.
type tokenRecorder struct{ t *revdist.Tokens }

func (r tokenRecorder) Decided(req *gate.CallRequest, d *gate.Decision) {
	if d.Allowed && req.Token != "" {
		r.t.AddString(req.Token)
	}
}

func (tokenRecorder) Settled(gate.SettledCall) {}

// statusWriter remembers the status of the response it writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}
