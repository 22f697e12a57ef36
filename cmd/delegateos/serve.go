package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/agentcard"
	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/proxy"
	"github.com/delegateos/delegateos/revocation"
	"github.com/delegateos/delegateos/serve"
)

var serveCmd = &command{
	name: "serve",
	args: "[--listen ADDR] [--policy FILE] [--token @FILE] [--root ID]... [--tls-cert FILE --tls-key FILE]\n" +
		"                    [--allow-host NAME]... [--allow-origin ORIGIN]... [--log FILE] [--revocations FILE] [--spend-store FILE]\n" +
		"                    [--authorize --grant @TOKEN --grant-key KEY --consent-password @FILE [--oauth-client ID=URI]...]\n" +
		"                    (-- UPSTREAM_COMMAND [ARGS...] | --upstream-url URL)",
	summary: "run the DCT gate as an MCP Streamable HTTP server: one relay, and one upstream process, per MCP session",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		fs.SetInterspersed(false)
		listen := fs.String("listen", "127.0.0.1:8080", "the address to listen on; anything but a loopback address exposes the gate to the network (then give --tls-cert and --tls-key)")
		endpoint := fs.String("endpoint", "/mcp", "the path of the MCP endpoint")
		policyPath := fs.String("policy", "", "the policy file (default: built-in defaults; see 'delegateos policy init')")
		token := fs.String("token", "", "a session token for sessions whose client sends none, as @FILE (default: $DELEGATEOS_TOKEN): every client that can reach the server gets what it grants. "+
			"Clients give their own per session in an Authorization: Bearer header, or per request in params._delegateos")
		roots := fs.StringArray("root", nil, "a trusted root principal ID or did:key (repeatable; added to the policy's roots)")
		tlsCert := fs.String("tls-cert", "", "serve HTTPS with this certificate (PEM; with --tls-key)")
		tlsKey := fs.String("tls-key", "", "the private key of --tls-cert (PEM)")
		allowHosts := fs.StringArray("allow-host", nil, "a name the Host header may carry besides the listen address and, on a loopback or any-address bind, localhost (repeatable; * allows any)")
		allowOrigins := fs.StringArray("allow-origin", nil, "an origin (scheme://host[:port]) browsers may call from besides those on an allowed host (repeatable)")
		maxSessions := fs.Int("max-sessions", 256, "sessions open at once (each has its own upstream process)")
		maxCredSessions := fs.Int("max-credential-sessions", serve.DefaultMaxCredentialSessions, "sessions open at once with one client's token (Authorization header); 0 means no bound")
		maxTreeSessions := fs.Int("max-tree-sessions", serve.DefaultMaxTreeSessions, "sessions open at once with tokens of one delegation tree (one root token and its attenuations); 0 means no bound")
		recheck := fs.Duration("recheck-interval", serve.DefaultRecheckInterval, "how often every session's token is checked again: a session whose token was revoked or expired, or whose delegation ended, is closed with its upstream (also checked on each of its requests and when a revocation is pushed)")
		maxCalls := fs.Int("max-calls", 1024, "requests in flight across all sessions")
		maxSessionCalls := fs.Int("max-session-calls", 64, "requests in flight in one session")
		idle := fs.Duration("idle-timeout", 10*time.Minute, "end a session, and its upstream, after this long without a request, or with calls in flight that no client reads")
		abandon := fs.Duration("abandon-timeout", serve.DefaultAbandonTimeout, "end a session, and its upstream, after this long with no stream of its client's open and no request: "+
			"a client that went away without ending its session (DELETE), as the TypeScript SDK's close() and the Inspector do; a client holding its GET stream open keeps its session. 0 turns it off (--idle-timeout still applies)")
		jsonResponses := fs.Bool("json-responses", false, "answer a request whose response is all the upstream sends for it with an application/json body, not an SSE stream (which a client can resume after a lost connection)")
		upstreamURL := fs.String("upstream-url", "", "an MCP server reached over Streamable HTTP, instead of an upstream command (each session gets its own upstream session)")
		upstreamHdrs := fs.StringArray("upstream-header", nil, "a header sent with every request to --upstream-url, as 'NAME: @FILE' (the file's contents), 'NAME: $VAR' (an environment variable) or 'NAME: VALUE' (repeatable): the upstream's credentials")
		maxBody := fs.Int64("max-body-bytes", 0, "the largest POST body accepted (default, and at most: the policy's max_frame_bytes)")
		maxInFlight := fs.Int64("max-body-bytes-in-flight", 0, "the bytes of request bodies the server holds at once, across all clients (default 64 MiB, or 4 times the body limit if larger); a request that gets no room within a second is refused 503 unread, and one credential's bodies hold at most a quarter of it")
		readTimeout := fs.Duration("read-timeout", 10*time.Second, "how long a client gets to send a request's headers, and then its body")
		drain := fs.Duration("drain-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long calls in flight get to finish before their sessions are closed")
		logFile := fs.String("log", "", "log to this file instead of standard error (overrides the policy)")
		revsFlag := fs.String("revocations", "", "a revocation list file, looked at on every call (overrides the policy)")
		spend := fs.String("spend-store", "", "where spend is recorded so it survives restarts (overrides the policy)")
		asJSON := fs.Bool("json", false, "once listening, print where as JSON on standard output ({\"address\", \"url\"}): for scripts that give --listen a port of 0")
		witnesses := fs.StringArray("witness", nil, "the did:key of a witness whose cosignatures of the audit log's checkpoints "+audit.CosignaturePath+" keeps (repeatable; without it none are taken)")
		keyFile := fs.String("key", "", "the server's key file (overrides proxy_key in the policy): it signs the receipts of the audit log, and its did:key is published in the agent card at "+agentcard.Path+" (no card without a key)")
		for _, x := range serveExtensions {
			if x.flags != nil {
				x.flags(fs)
			}
		}
		return func(e *env, args []string) error {
			hups, stopHups := hangups()
			defer stopHups()
			// DELEGATEOS_TOKEN is read below, as a token rather than a flag.
			fromEnv, err := flagsFromEnv(fs, os.Getenv, "token")
			if err != nil {
				return err
			}
			for _, w := range *witnesses {
				if _, err := identity.PublicKeyFromDID(w); err != nil {
					return fixf("--witness %s: %v; give the witness's did:key ('delegateos id --key FILE' prints it)", w, err)
				}
			}
			if (len(args) == 0) == (*upstreamURL == "") {
				return fixf("give the upstream MCP server's command after -- (one process per session), or --upstream-url URL, not both: e.g. delegateos serve --policy policy.yaml -- npx -y @modelcontextprotocol/server-everything")
			}
			var upstreamConn proxy.UpstreamConn
			var upstreamClient *http.Client // for --upstream-url
			if *upstreamURL == "" {
				// Each session starts the command: a command that cannot
				// start is said now, not to every client.
				if _, err := exec.LookPath(args[0]); err != nil {
					return inputf("the upstream command %s: %v%s", args[0], err, startFix(err, args[0], nil))
				}
			} else {
				u, err := url.Parse(*upstreamURL)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return fixf("--upstream-url %q: give the MCP endpoint's http:// or https:// URL, e.g. http://127.0.0.1:3001/mcp", *upstreamURL)
				}
				// Each session's relay reaches the server through a bridge
				// in this process; the sessions share the client's
				// connections.
				upstreamClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
					MaxIdleConns: *maxCalls, MaxIdleConnsPerHost: *maxCalls, IdleConnTimeout: time.Minute}}
			}
			if (*tlsCert == "") != (*tlsKey == "") {
				return fixf("--tls-cert and --tls-key go together: give both, or neither")
			}
			if !strings.HasPrefix(*endpoint, "/") {
				return fixf("--endpoint %q: give a path starting with /, e.g. /mcp", *endpoint)
			}
			pol := policy.Default()
			policyDigest := ""
			if *policyPath != "" {
				p, digest, err := policy.LoadWithDigest(*policyPath)
				if err != nil {
					return policyLoadError(*policyPath, err)
				}
				pol, policyDigest = p, digest
			}
			if len(*upstreamHdrs) > 0 && *upstreamURL == "" {
				return fixf("--upstream-header goes with --upstream-url")
			}
			upstreamHeader, literalHeaders, err := upstreamHeaders(*upstreamHdrs)
			if err != nil {
				return err
			}
			if upstreamClient != nil {
				// The bridge holds no message the relay would refuse.
				upstreamConn = serve.Upstream(*upstreamURL, upstreamHeader, upstreamClient, pol.MaxFrameBytes)
			}
			// preparePolicy applies the flags over the policy, at start and
			// at each reload alike.
			preparePolicy := func(pol *policy.Policy) error {
				if err := applyGateFlags(pol, *policyPath, *roots, *logFile, *revsFlag, *spend); err != nil {
					return err
				}
				if pol.UpstreamUser != "" {
					return fixf("upstream_user in the policy is not supported by serve yet: run serve itself as the user the upstream should run as, or remove upstream_user")
				}
				return nil
			}
			if err := preparePolicy(pol); err != nil {
				return err
			}
			from := settingFrom
			log, closeLog, err := newLogger(e, pol.Log)
			if err != nil {
				return inputf("%v; give a path the server can write (%s), or leave it out to log to standard error", err, from(*logFile != "", "--log", "log.file"))
			}
			defer closeLog()
			warnRedisPasswordFlags(log, "--spend-store", *spend, "--revocations", *revsFlag)
			if len(fromEnv) > 0 {
				log.Info("flags taken from the environment", zap.Strings("flags", fromEnv))
			}
			warnUnwritable(pol, log)
			if len(literalHeaders) > 0 {
				log.Warn("--upstream-header values given on the command line can be read by every local user (ps, /proc/PID/cmdline); give NAME: @FILE or NAME: $VAR instead", zap.Strings("headers", literalHeaders))
			}

			tokenArg := *token
			if tokenArg == "" {
				tokenArg = os.Getenv("DELEGATEOS_TOKEN")
			}
			os.Unsetenv("DELEGATEOS_TOKEN") // not for the upstreams
			defaultToken := ""
			if tokenArg != "" {
				if *token != "" && !strings.HasPrefix(*token, "@") {
					log.Warn("the session token was given on the command line, where every local user can read it (ps, /proc/PID/cmdline); give --token @FILE (mode 0600) instead")
				}
				if path, ok := strings.CutPrefix(tokenArg, "@"); ok {
					if err := checkTokenFile(path, nil, log); err != nil {
						return err
					}
				}
				if defaultToken, err = readToken(e, tokenArg); err != nil {
					return err
				}
			}
			flags := gateFlags{revocations: *revsFlag != "", spendStore: *spend != "", who: "the server", policyDigest: policyDigest, stateDir: stateDirForStores(pol)}
			snap, err := openGate(pol, flags, log)
			if err != nil {
				return err
			}
			// Every session reads the snapshot in force at each request: a
			// reload swaps it (reload.go).
			current := gate.NewCurrent(snap)
			defer current.Close()
			g, revs, delegations := snap.Gate, snap.Revocations, snap.Delegations
			// The token is checked by the gate in force (its roots, the
			// delegations ended).
			checkToken := func(tok string) error { return current.Load().Gate.CheckToken(tok) }
			if defaultToken != "" {
				if err := checkToken(defaultToken); err != nil {
					return fixf("the session token is not valid: %v; %s", err, tokenFix(err))
				}
			}
			// The body limits, then the addresses (the extensions' too), the
			// certificate and tracing are checked before the audit log is
			// opened: a start that fails on them leaves no trace in it.
			maxBodyBytes := int64(pol.MaxFrameBytes)
			if *maxBody > 0 {
				maxBodyBytes = *maxBody
			}
			if pol.MaxFrameBytes > 0 && maxBodyBytes > int64(pol.MaxFrameBytes) {
				// The relay refuses a larger message, and may not be able to
				// read its id to say which request it refuses.
				log.Warn("--max-body-bytes is above the policy's max_frame_bytes, which bounds every message: using max_frame_bytes", zap.Int64("max_body_bytes", maxBodyBytes), zap.Int("max_frame_bytes", pol.MaxFrameBytes))
				maxBodyBytes = int64(pol.MaxFrameBytes)
			}
			if *maxInFlight > 0 && *maxInFlight < maxBodyBytes {
				return fixf("--max-body-bytes-in-flight %d is below the largest body accepted (%d): give at least that, or a lower --max-body-bytes", *maxInFlight, maxBodyBytes)
			}
			ln, err := net.Listen("tcp", *listen)
			if err != nil {
				return inputf("--listen %s: %v", *listen, err)
			}
			defer ln.Close()
			var tlsConfig *tls.Config
			if *tlsCert != "" {
				cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
				if err != nil {
					return inputf("--tls-cert %s --tls-key %s: %v", *tlsCert, *tlsKey, err)
				}
				tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			}
			for _, x := range serveExtensions {
				if x.listen != nil {
					closeListener, err := x.listen()
					if err != nil {
						return err
					}
					defer closeListener()
				}
			}
			// setup is what extensions see and may change before the
			// server is built; the relays read its Log when they start.
			keyPath := pol.ProxyKey
			if *keyFile != "" {
				keyPath = *keyFile
			}
			setup := &serveSetup{Policy: pol, Gate: g, Gates: current, Log: log, Revocations: revs, DefaultToken: defaultToken, KeyFile: keyPath,
				Listen: *listen, TLS: *tlsCert != "", Endpoint: *endpoint, CheckToken: checkToken, Delegations: delegations}
			// The extensions check their flags and build what does not
			// need the audit log before it is opened, too.
			for _, x := range serveExtensions {
				if x.check != nil {
					if err := x.check(setup); err != nil {
						return err
					}
				}
			}
			tr, closeTracing, err := openTracing(log)
			if err != nil {
				return inputf("tracing: %v", err)
			}
			defer closeTracing()
			// One audit log for the server: every session's relay hands its
			// decisions to it, and it is closed once the sessions are drained.
			evidence, closeEvidence, err := openEvidence(pol, policyDigest, *keyFile, log)
			if err != nil {
				return err
			}
			defer func() {
				if cerr := closeEvidence(); cerr != nil {
					log.Error("the audit log was not closed cleanly", zap.Error(cerr))
				}
			}()

			reload := &reloader{current: current, load: reloadPolicy(*policyPath, preparePolicy), opts: flags.options(log),
				log: log, recorded: recordReload(evidence, reloadTarget(*policyPath))}
			// SIGHUP reloads the policy rather than ending the server: its
			// sessions, calls in flight and audit log go on.
			defer reload.onHangup(hups)()
			setup.Reload, setup.Evidence = reload, evidence
			relayConfig := func(s *serve.Session) proxy.Config {
				tok := s.Token
				if tok == "" {
					tok = defaultToken
				}
				c := proxy.Config{
					Upstream: args, UpstreamConn: upstreamConn, Gates: current, SessionToken: tok,
					MaxFrameBytes: pol.MaxFrameBytes, Log: setup.Log.With(zap.String("session", s.ID[:8])),
					Evidence: setup.Evidence, // the audit log, or what an extension put in its place
				}
				if tr != nil {
					c.Tracer = tr.Tracer
				}
				if !s.LDPFront {
					c.ApprovalElsewhere = setup.ApprovalElsewhere
				}
				return c
			}
			relay := func(ctx context.Context, s *serve.Session, in io.Reader, out io.Writer) error {
				return proxy.Run(ctx, relayConfig(s), in, out)
			}
			sopts := serve.Options{
				Relay: relay, Endpoint: *endpoint, Listen: *listen,
				AllowHosts: *allowHosts, AllowOrigins: *allowOrigins,
				MaxBodyBytes: maxBodyBytes,
				MaxSessions:  *maxSessions, MaxCalls: *maxCalls, MaxSessionCalls: *maxSessionCalls,
				IdleTimeout: *idle, AbandonTimeout: abandonTimeout(*abandon), ReadTimeout: *readTimeout, JSONResponses: *jsonResponses, CheckToken: withClientFix(checkToken), Log: log,
				RequireToken:          defaultToken == "" && !pol.AllowUnauthenticated,
				MaxCredentialSessions: noBound(*maxCredSessions), MaxTreeSessions: noBound(*maxTreeSessions),
				SessionTree: serve.TokenTree, SessionCredential: serve.TokenCredential, SessionLive: serve.SessionLive(checkToken), RecheckInterval: *recheck,
				UpstreamReady: serve.UpstreamReady(args, *upstreamURL),
			}
			if *maxInFlight > 0 {
				sopts.MaxBodyBytesInFlight = *maxInFlight
				if *maxInFlight/4 < sopts.MaxBodyBytes {
					log.Warn("one credential's bodies hold at most a quarter of --max-body-bytes-in-flight: larger bodies are refused (413)", zap.Int64("max_body_bytes_per_credential", *maxInFlight/4))
				}
			}
			setup.Options = &sopts
			for _, x := range serveExtensions {
				if x.configure != nil {
					if err := x.configure(setup); err != nil {
						return err
					}
				}
			}
			srv, err := serve.New(sopts)
			if err != nil {
				return fixf("--listen %s: %v; give HOST:PORT, e.g. 127.0.0.1:8080", *listen, err)
			}
			setup.Server = srv
			if l, ok := evidence.(*audit.Log); ok {
				// Witnesses read the latest checkpoint and hand their
				// cosignatures here (docs/receipts.md, Witnesses).
				h := srv.Guard(audit.NewWitnessHandler(l, *witnesses))
				srv.Mux.Handle("GET "+audit.CheckpointPath, h)
				srv.Mux.Handle("POST "+audit.CosignaturePath, h)
			}
			for _, x := range serveExtensions {
				if x.mount != nil {
					if err := x.mount(setup); err != nil {
						return err
					}
				}
			}
			if host, _, _ := net.SplitHostPort(*listen); !isLoopback(host) && *tlsCert == "" {
				log.Warn("listening on a non-loopback address without TLS: tokens and calls cross the network in the clear; give --tls-cert and --tls-key")
			}
			hs := srv.HTTPServer()
			for _, x := range serveExtensions {
				if x.wrap != nil {
					hs.Handler = x.wrap(hs.Handler)
				}
			}
			scheme := "http"
			if *tlsCert != "" {
				scheme = "https"
			}
			url := scheme + "://" + ln.Addr().String() + *endpoint
			log.Info("serving", zap.String("address", ln.Addr().String()), zap.String("url", url))
			// Ready: listening, and SIGHUP reloads (taken since the start).
			notifyReady(log)
			if *asJSON {
				if err := writeJSON(e, map[string]string{"address": ln.Addr().String(), "url": url}); err != nil {
					return err
				}
			}
			signal.Ignore(syscall.SIGPIPE)
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			served := make(chan error, 1)
			go func() {
				if tlsConfig != nil {
					hs.TLSConfig = tlsConfig
					served <- hs.ServeTLS(ln, "", "")
				} else {
					served <- hs.Serve(ln)
				}
			}()
			select {
			case err := <-served:
				srv.Drain(context.Background())
				return inputf("serving failed: %v", err)
			case sig := <-sigs:
				log.Info("draining before exit", zap.String("signal", sig.String()), zap.Duration("drain_timeout", *drain))
			}
			ctx, cancel := context.WithTimeout(context.Background(), *drain)
			defer cancel()
			srv.Drain(ctx)
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("closing connections", zap.Error(err))
			}
			log.Info("stopped")
			return nil
		}
	},
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serveExtension adds to `delegateos serve`: flags, its own listeners
// (listen, taken with serve's), then settings before
// the server is built (configure: Options.Authorize, a wrapped Relay) and
// handlers after (mount: on Server.Mux); wrap, when set, wraps the
// server's whole handler (before the transport's own checks).
type serveExtension struct {
	flags func(fs *pflag.FlagSet)
	// listen takes the extension's own listeners, before the audit log is
	// opened; serve calls close when it returns.
	listen func() (close func(), err error)
	// check checks the extension's flags and builds what needs neither
	// the audit log nor the server, before the log is opened: a start it
	// refuses leaves no trace there. Its setup has no Reload, Evidence,
	// Options or Server yet.
	check     func(*serveSetup) error
	configure func(*serveSetup) error
	mount     func(*serveSetup) error
	wrap      func(http.Handler) http.Handler
}

// serveSetup is what an extension of serve works with.
type serveSetup struct {
	// Policy and Gate are those the server started with: configure may
	// set the Gate's hooks (Observer, Accept), which a reload carries
	// over. Gates is the snapshot in force, for what is read per request.
	Policy *policy.Policy
	Gate   *gate.Gate
	Gates  *gate.Current
	// Reload applies the policy file again (POST /reload, SIGHUP);
	// configure may have it tell of each snapshot swapped in (onApplied).
	Reload *reloader
	// Log is the server's logger; configure may replace it (to tee the
	// decision lines, say): every session's relay logs to it.
	Log *zap.Logger
	// Revocations is the policy's revocation list (a file or Redis), nil without one.
	Revocations revocation.Live
	// DefaultToken is the token of sessions whose client sends none.
	DefaultToken string
	// KeyFile is the server's key file (--key, else proxy_key), "" for none.
	KeyFile string
	// Listen is --listen, TLS whether the server serves HTTPS, Endpoint
	// the MCP endpoint's path.
	Listen   string
	TLS      bool
	Endpoint string
	// CheckToken verifies a token and that its delegation has not ended.
	CheckToken func(string) error
	// Delegations is the workspace's delegation handling, nil without one.
	Delegations *gate.Delegations
	// Evidence is the audit log, nil without one.
	Evidence proxy.Evidence
	// ApprovalElsewhere, when set (mount), is why no MCP client is asked
	// to approve a held call: the LDP front's approvers answer every one
	// (proxy.Config.ApprovalElsewhere of every session but the front's).
	ApprovalElsewhere string
	Options           *serve.Options // configure may change it
	Server            *serve.Server  // set for mount
}

// serveExtensions are added to serve in order.
var serveExtensions []serveExtension

// withClientFix adds to check's refusal of a client's token what the
// client's user can do about it: the refusal is all an MCP client shows.
func withClientFix(check func(string) error) func(string) error {
	return func(tok string) error {
		err := check(tok)
		if err == nil {
			return nil
		}
		fix := "ask whoever gave you the token for a new one, or inspect it with 'delegateos dct inspect --token @FILE'"
		switch {
		case errors.Is(err, dct.ErrExpired):
			fix = "it has expired: get a new one (mint or attenuate it again) and reconnect with it"
		case errors.Is(err, dct.ErrRevoked):
			fix = "it, or a token it was built on, was revoked: ask its issuer for a new one"
		case errors.Is(err, dct.ErrInvalidSignature) && strings.Contains(err.Error(), "not a trusted root"):
			fix = "this server does not trust its issuer: use a token minted by one of the server's roots"
		case errors.Is(err, dct.ErrMalformed):
			fix = "send the whole token as 'delegateos dct mint' or 'dct attenuate' printed it"
		}
		return fmt.Errorf("%w; %s", err, fix)
	}
}

// abandonTimeout is --abandon-timeout as serve.Options takes it: 0 (off)
// is negative there, where zero means the default.
func abandonTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// noBound is a session cap flag as serve.Options takes it: 0 (no bound)
// is negative there, where zero means the default.
func noBound(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
