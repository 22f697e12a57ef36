package main

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/agentcard"
	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/gate"
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
	var metricsLn net.Listener
	serveExtensions = append(serveExtensions, serveExtension{
		flags: func(fs *pflag.FlagSet) { f = declareServeExtraFlags(fs) },
		listen: func() (func(), error) {
			at := *f.metricsAt
			if at == "" || at == metricsOff {
				return func() {}, nil
			}
			ln, err := listenMetrics(at)
			if err != nil {
				return nil, err
			}
			metricsLn = ln
			return func() { ln.Close() }, nil
		},
		check: func(s *serveSetup) error {
			var err error
			x, err = f.build(s.Policy, s.Revocations, s.KeyFile, s.Gate, s.Gates, s.Log, s.Endpoint)
			return err
		},
		configure: func(s *serveSetup) error {
			if s.Reload != nil {
				// A tool a reloaded policy names gets its own label.
				s.Reload.onApplied(func(snap *gate.Snapshot) { x.metrics.Tools(snap.Policy) })
			}
			if x.sig == nil {
				return nil
			}
			// It verifies every signature (against the token's holder):
			// serve need not verify one itself.
			x.sig.Apply(s.Options, s.DefaultToken)
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
			if metricsLn != nil {
				var reload http.Handler // none without a reloader
				if s.Reload != nil {
					reload = s.Reload
				}
				if err := serveMetrics(*f.metricsAt, metricsLn, x.metrics, reload, s.Options, s.Log); err != nil {
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
		metricsAt:  fs.String("metrics-listen", "", "serve /metrics, and POST /reload (the policy applied again, as on SIGHUP), on a listener of its own at HOST:PORT (an internal interface, say) instead of beside the MCP endpoint; off serves no metrics"),
	}
}

// serveExtras are the handlers and hooks built from serveExtraFlags.
type serveExtras struct {
	metrics *metrics.Metrics
	dist    *revdist.Distributor // nil without a revocation list
	// revoked, once mounted, ends the sessions whose tokens a new
	// revocation entry revokes (the server's Recheck).
	revoked atomic.Pointer[func()]
	tokens  *revdist.Tokens
	card    http.Handler      // nil without --key
	sig     *serve.Signatures // nil unless signatures are required
}

// build makes the extras for a gate whose policy and revocation list (nil
// when the policy has none) are given, and sets the gate's Observer.
// keyFile is the server's key (--key or proxy_key; "" for none), whose
// did:key the agent card publishes.
func (f *serveExtraFlags) build(pol *policy.Policy, revs revocation.Live, keyFile string, g *gate.Gate, current *gate.Current, log *zap.Logger, mcpPath string) (*serveExtras, error) {
	x := &serveExtras{metrics: metrics.New(), tokens: &revdist.Tokens{}}
	version, commit := buildVersion()
	if commit == "" {
		commit = "unknown"
	}
	x.metrics.BuildInfo(version, commit)
	x.metrics.Tools(pol)
	g.Observer = gate.Observers{x.metrics, tokenRecorder{x.tokens}}
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
		v := &avpsig.Verifier{Window: *f.sigWindow, MaxNonces: *f.sigNonces, MaxNoncesPerTree: *f.sigPerTree}
		if err := shareNonces(v, pol, log); err != nil {
			return nil, err
		}
		x.sig = &serve.Signatures{Verifier: v, VerifyToken: func(token string) error {
			_, err := current.Load().Gate.VerifyToken(token) // the roots in force
			return err
		}}
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
		var rootsAuthority revdist.Authority = roots
		if current != nil {
			rootsAuthority = rootsInForce{current}
		}
		sugar := log.Sugar()
		x.dist = &revdist.Distributor{
			Store:     &revdist.FileStore{Path: pol.RevocationList, File: file},
			Authority: revdist.AnyOf{rootsAuthority, x.tokens},
			Peers:     *f.peers, Interval: *f.poll,
			Logf: func(format string, args ...any) { sugar.Warnf(format, args...) },
			Added: func() {
				if f := x.revoked.Load(); f != nil {
					(*f)()
				}
			},
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
			AcceptsRevocationPushes: x.dist != nil, RequireSignature: x.sig != nil, Labels: ldpLabels(pol, k)}
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
		// The sessions of the tokens a new entry revokes end now, not at
		// the next recheck; a push refused, or of an entry already held,
		// costs no recheck (the distributor calls Added only for new ones).
		x.revoked.Store(&revoked)
		mux.Handle(revdist.Path, guard(x.dist))
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

// shareNonces gives v the nonce store the policy names (see
// policy.NonceStore), if any, so that every server sharing it accepts a
// signed request once between them.
func shareNonces(v *avpsig.Verifier, pol *policy.Policy, log *zap.Logger) error {
	url := pol.NonceStore()
	if url == "" {
		return nil
	}
	if err := v.ShareNonces(context.Background(), url); err != nil {
		return fixf("%v", err)
	}
	log.Info("signature nonces are shared in Redis: a signed request is accepted once by all the servers that use it", zap.String("store", redisconn.Redact(url)))
	if rn, ok := v.Store.(*avpsig.RedisNonces); ok {
		if w := rn.Unverifiable(); w != "" {
			log.Warn(w)
		}
	}
	return nil
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

// rootsInForce accepts revocations from the trusted roots of the policy
// in force, which a reload may change.
type rootsInForce struct{ current *gate.Current }

func (r rootsInForce) Authorize(e revocation.Entry) error {
	roots, err := revdist.NewPrincipals(r.current.Load().Policy.Roots...)
	if err != nil {
		return err
	}
	return roots.Authorize(e)
}
