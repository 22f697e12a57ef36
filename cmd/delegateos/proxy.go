package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/logline"
	"github.com/delegateos/delegateos/internal/stdio"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/proxy"
	"github.com/delegateos/delegateos/upstreamuser"
)

var proxyCmd = &command{
	name: "proxy",
	args: "[--policy FILE] [--token @FILE] [--root ID]... [--key FILE] [--upstream-user USER[:GROUP]] [--log FILE] [--revocations FILE]\n" +
		"                    [--spend-store FILE] [--observe] -- UPSTREAM_COMMAND [ARGS...]",
	summary: "run an MCP server behind the DCT gate: point your MCP client at this command",
	// A client that starts a proxy that cannot start sees the reason.
	answersClient: true,
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		fs.SetInterspersed(false) // everything from the upstream command on is its own
		policyPath := fs.String("policy", "", "the policy file (default: built-in defaults; see 'delegateos policy init')")
		token := fs.String("token", "", "the session's DCT as @FILE, a file only the proxy's user can read (default: $DELEGATEOS_TOKEN); "+
			"a token written here literally is visible to every local user in the process list. Calls may also carry their own in params._delegateos")
		roots := fs.StringArray("root", nil, "a trusted root principal ID or did:key (repeatable; added to the policy's roots)")
		upstreamUserFlag := fs.String("upstream-user", "", "run the upstream as this USER[:GROUP] (name or ID), so that it cannot read the session token, "+
			"the proxy's memory or its files; needs root, or CAP_SETUID, CAP_SETGID and CAP_KILL (overrides the policy)")
		keyFile := fs.String("key", "", "the proxy's key file, which signs its receipts (overrides proxy_key in the policy)")
		logFile := fs.String("log", "", "log to this file instead of standard error (overrides the policy)")
		revsFlag := fs.String("revocations", "", "a revocation list file, looked at on every call (overrides the policy)")
		spend := fs.String("spend-store", "", "where spend is recorded so it survives restarts (overrides the policy)")
		observe := fs.Bool("observe", false, "a dry run: decide and log every request as usual, but forward refused ones anyway "+
			`(their log lines say "enforced": false; they are charged nothing) and show lists unfiltered (a log line names what would be hidden). `+
			"Nothing is enforced: never use it to protect anything")
		return func(e *env, args []string) error {
			hups, stopHups := hangups()
			defer stopHups()
			if len(args) == 0 {
				return fixf("give the upstream MCP server's command after --, e.g. delegateos proxy --policy policy.yaml --token @agent.tok -- npx -y @modelcontextprotocol/server-everything")
			}
			pol := policy.Default()
			policyDigest := ""
			if *policyPath != "" {
				p, digest, err := policy.LoadWithDigest(*policyPath)
				policyDigest = digest
				if err != nil {
					return policyLoadError(*policyPath, err)
				}
				pol = p
			}
			// A dry run is only worth its log: what it would have refused is
			// written at info level, so observe mode logs at info at least.
			raisedLevel := ""
			// preparePolicy applies the flags over the policy, at start and at
			// each reload alike.
			preparePolicy := func(pol *policy.Policy) error {
				if err := applyGateFlags(pol, *policyPath, *roots, *logFile, *revsFlag, *spend); err != nil {
					return err
				}
				if pol.RequireSignature {
					return fixf("the policy sets require_signature, which only delegateos serve can enforce: a stdio client sends no signed HTTP requests; remove it for this proxy, or serve over HTTP")
				}
				if *upstreamUserFlag != "" {
					pol.UpstreamUser = *upstreamUserFlag
				}
				if *observe && (pol.Log.Level == "warn" || pol.Log.Level == "error") {
					raisedLevel, pol.Log.Level = pol.Log.Level, "info"
				}
				return nil
			}
			if err := preparePolicy(pol); err != nil {
				return err
			}
			from := settingFrom
			log, closeLog, err := newLogger(e, pol.Log)
			if err != nil {
				return inputf("%v; give a path the proxy can write (%s), or leave it out to log to standard error", err, from(*logFile != "", "--log", "log.file"))
			}
			defer closeLog()
			warnRedisPasswordFlags(log, "--spend-store", *spend, "--revocations", *revsFlag)
			warnUnwritable(pol, log)

			var as *upstreamuser.User
			if pol.UpstreamUser != "" {
				what := from(*upstreamUserFlag != "", "--upstream-user", "upstream_user")
				if as, err = upstreamuser.Resolve(pol.UpstreamUser); err != nil {
					return fixf("%s: %v", what, err)
				}
				if err := upstreamuser.CheckCanSwitch(); err != nil {
					return fixf("%s %s: %v", what, pol.UpstreamUser, err)
				}
			}

			tokenArg, fromEnv := *token, false
			if tokenArg == "" {
				tokenArg = os.Getenv("DELEGATEOS_TOKEN")
				fromEnv = tokenArg != ""
			}
			// The upstream inherits this process's environment: it must not
			// receive the session's token, whatever the token grants it.
			os.Unsetenv("DELEGATEOS_TOKEN")
			if tokenArg == "-" {
				return fixf("--token - is not possible: standard input carries the MCP protocol; give --token @FILE")
			}
			sessionToken := ""
			if tokenArg != "" {
				if path, ok := strings.CutPrefix(tokenArg, "@"); ok {
					if err := checkTokenFile(path, as, log); err != nil {
						return err
					}
				}
				if sessionToken, err = readToken(e, tokenArg); err != nil {
					return err
				}
				if !fromEnv && !strings.HasPrefix(tokenArg, "@") {
					if as != nil {
						return fixf("--token: a token written on the command line can be read by every local user, the upstream user %s included (ps, /proc/PID/cmdline); give it as --token @FILE (mode 0600) or in DELEGATEOS_TOKEN", as.Name())
					}
					log.Warn("the session token was given on the command line, where every local user can read it (ps, /proc/PID/cmdline); give --token @FILE (mode 0600) instead")
				}
			}
			if as != nil {
				if err := as.CheckRedis([]upstreamuser.Store{
					{What: "the spend store", Path: pol.SpendStore, OnCommandLine: *spend != ""},
					{What: "the revocation list", Path: pol.RevocationList, OnCommandLine: *revsFlag != ""},
					{What: "the ended-delegation set", Path: pol.EndedDelegations},
				}, *policyPath); err != nil {
					return fixf("--upstream-user %s: %v", as.Name(), err)
				}
			}
			flags := gateFlags{revocations: *revsFlag != "", spendStore: *spend != "", who: "the proxy", policyDigest: policyDigest, stateDir: stateDirForStores(pol)}
			snap, err := openGate(pol, flags, log)
			if err != nil {
				return err
			}
			current := gate.NewCurrent(snap)
			defer current.Close()
			g := snap.Gate
			if sessionToken != "" {
				if _, err := g.VerifyToken(sessionToken); errors.Is(err, gate.ErrNoRoots) {
					return fixf("a session token needs a trusted root to be verified against: give --root ID (the root issuer of the token; 'delegateos dct inspect --token @FILE' shows it) or list it under roots in the policy file")
				} else if err != nil {
					return fixf("the session token is not valid: %v; %s", err, tokenFix(err))
				}
			}
			var prepare func(*exec.Cmd) error
			if as != nil {
				// What the gate decides by must be out of the upstream's
				// reach, or it could revoke its revocations, reset its spend
				// or reopen its ended delegations.
				proxyKey := pol.ProxyKey
				if *keyFile != "" {
					proxyKey = *keyFile
				}
				if pol.AuditLog == "" {
					proxyKey = ""
				}
				if proxyKey != "" && as.MayAccess(proxyKey, upstreamuser.Read) {
					return fixf("--upstream-user %s: the upstream user can read the proxy key %s, so it could sign receipts the proxy never made: make it readable by the proxy's user only (chown it to that user, chmod 600)", as.Name(), proxyKey)
				}
				if err := as.CheckFiles([]upstreamuser.Store{
					{What: "the revocation list", Path: pol.RevocationList},
					{What: "the spend store", Path: pol.SpendStore},
					{What: "the rate-limit windows", Path: gate.RatesPath(pol)},
					{What: "the workspace", Path: pol.Workspace},
					{What: "the audit log", Path: pol.AuditLog},
					{What: "the proxy key", Path: proxyKey},
				}); err != nil {
					return fixf("--upstream-user %s: %v", as.Name(), err)
				}
				prepare = as.Prepare
				if wd, err := os.Getwd(); err == nil && !as.MayAccess(wd, upstreamuser.Execute) {
					log.Warn("the upstream user cannot enter the working directory: relative paths in its command and arguments will fail; start the proxy in a directory that user can enter",
						zap.String("user", as.String()), zap.String("dir", wd))
				}
				log.Info("the upstream runs as another user", zap.String("user", as.String()))
			}
			// A client that closes our stderr or stdout must not kill the
			// proxy mid-session (in-flight calls still need settling): writes
			// then fail with EPIPE instead.
			signal.Ignore(syscall.SIGPIPE)
			in, out := e.stdin, e.stdout
			if in == io.Reader(os.Stdin) {
				f, restore := stdio.Pollable(os.Stdin, os.Stderr)
				defer restore()
				in = f
			}
			if out == io.Writer(os.Stdout) {
				f, restore := stdio.Pollable(os.Stdout, os.Stderr)
				defer restore()
				out = f
			}
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			if raisedLevel != "" {
				log.Warn("observe mode logs at info level, whatever log.level says: its decision lines are the point of the run", zap.String("level", raisedLevel))
			}
			if *observe {
				// Said on standard error even when the log goes to a file:
				// whoever started the proxy must see that nothing is enforced.
				fmt.Fprintln(e.stderr, proxy.ObserveBanner)
			}
			// Tracing is set up before the audit log is opened: a start that
			// fails on it leaves no trace in the log.
			tr, closeTracing, err := openTracing(log)
			if err != nil {
				return inputf("tracing: %v", err)
			}
			defer closeTracing()
			evidence, closeEvidence, err := openEvidence(pol, policyDigest, *keyFile, log)
			if err != nil {
				return err
			}
			// SIGHUP (taken since the start) reloads the policy rather than
			// ending the proxy: its calls in flight, and the audit log, go on.
			r := &reloader{current: current, load: reloadPolicy(*policyPath, preparePolicy), opts: flags.options(log),
				log: log, recorded: recordReload(evidence, reloadTarget(*policyPath))}
			stopReloads := r.onHangup(hups)
			defer stopReloads()
			// Until the relay reads the client, a failure (an upstream that
			// cannot be started) is the answer to its initialize.
			in = &watchedReader{r: in, read: &e.clientRead}
			cfg := proxy.Config{
				Upstream: args, Gates: current, SessionToken: sessionToken,
				MaxFrameBytes: pol.MaxFrameBytes, Observe: *observe,
				Log: log, Signals: sigs, PrepareUpstream: prepare, Evidence: evidence,
			}
			if tr != nil {
				cfg.Tracer = tr.Tracer
			}
			err = proxy.Run(context.Background(), cfg, in, out)
			stopReloads()
			if cerr := closeEvidence(); cerr != nil {
				log.Error("the audit log was not closed cleanly", zap.Error(cerr))
			}
			var exit *proxy.UpstreamExitError
			if errors.As(err, &exit) {
				return checkError{exit.Error()}
			}
			if err != nil {
				return inputf("%v%s", err, startFix(err, args[0], as))
			}
			return nil
		}
	},
}

// watchedReader sets read once anything is read through it.
type watchedReader struct {
	r    io.Reader
	read *atomic.Bool
}

func (w *watchedReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if !w.read.Load() {
		w.read.Store(true)
	}
	return n, err
}

// policyLoadError says what is wrong with --policy FILE and what to do.
func policyLoadError(path string, err error) error {
	var problems policy.Errors
	switch {
	case errors.As(err, &problems):
		return inputf("%v; 'delegateos policy check %s' lists every problem", err, path)
	case errors.Is(err, fs.ErrNotExist):
		return inputf("--policy %s: the file does not exist; give the path of a policy file, or write one with 'delegateos policy init --out %s -- UPSTREAM_COMMAND'", path, path)
	}
	return inputf("--policy %s: %v", path, err)
}

// checkPins refuses to start with a tool_pins lock file that is missing
// or not valid, saying what to do.
func checkPins(lock, policyPath string) error {
	if lock == "" {
		return nil
	}
	_, err := policy.LoadPins(lock)
	var problems policy.Errors
	switch {
	case err == nil:
		return nil
	case errors.As(err, &problems):
		return inputf("tool_pins: %v", err)
	case errors.Is(err, fs.ErrNotExist):
		return inputf("tool_pins: the lock file %s does not exist, so the upstream's definitions cannot be checked; review and approve them with 'delegateos pin --policy %s -- UPSTREAM...', or remove tool_pins from the policy", lock, policyPath)
	}
	return inputf("tool_pins: the lock file %s cannot be read: %v", lock, err)
}

// tokenFix says what to do about a session token that does not verify.
func tokenFix(err error) string {
	switch {
	case errors.Is(err, dct.ErrMalformed):
		return "give the whole token as 'delegateos dct mint' or 'dct attenuate' printed it (the file of --token @FILE holds just the token)"
	case errors.Is(err, dct.ErrExpired):
		return "mint or attenuate a new one"
	case errors.Is(err, dct.ErrRevoked):
		return "it, or a token it was built on, is in the revocation list: ask its issuer for a new one"
	case errors.Is(err, dct.ErrInvalidSignature) && strings.Contains(err.Error(), "not a trusted root"):
		return "give --root with the principal ID of the key that minted it ('delegateos dct inspect --token @FILE' shows the issuer), if you trust that key"
	}
	return "it was altered or built wrongly: mint or attenuate it again ('delegateos dct inspect --token @FILE' shows what it holds)"
}

// startFix says what to do about an upstream command that cannot start.
func startFix(err error, command string, as *upstreamuser.User) string {
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return fmt.Sprintf("; check the command after --: give the full path of %s, or add its directory to PATH", command)
	case as != nil && (errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EACCES)):
		return fmt.Sprintf("; the upstream user %s must be able to execute %s and enter every directory above it (chmod o+rx, or a 0755 directory)", as.Name(), command)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("; make %s executable (chmod +x)", command)
	}
	return ""
}

// checkTokenFile looks at --token @FILE before it is read
// (upstreamuser.CheckTokenFile) and logs its warnings.
func checkTokenFile(path string, as *upstreamuser.User, log *zap.Logger) error {
	warnings, err := upstreamuser.CheckTokenFile(path, as)
	if err != nil {
		return fixf("--token @%s: %v", path, err)
	}
	for _, w := range warnings {
		log.Warn(w, zap.String("file", path))
	}
	return nil
}

// newLogger logs JSON lines to standard error or a file: never to standard
// output, which carries the protocol.
func newLogger(e *env, c policy.LogConfig) (*zap.Logger, func(), error) {
	level := zapcore.InfoLevel
	if c.Level != "" {
		if err := level.Set(c.Level); err != nil {
			return nil, nil, fmt.Errorf("log level %q: %v", c.Level, err)
		}
	}
	var out io.Writer = e.stderr
	closeFile := func() {}
	if c.File != "" {
		f, err := os.OpenFile(c.File, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("open log file: %w", err)
		}
		out = f
		closeFile = func() { f.Close() }
	}
	sink := newLogSink(out)
	log := zap.New(logline.NewCore(sink, level))
	return log, func() { _ = sink.Sync(); closeFile() }, nil
}

// logSink buffers log lines so a burst of calls costs a few writes instead
// of one per line: a timer flushes any buffered line within logFlushDelay,
// and the proxy flushes on exit. Sync does not fsync: the log is a record,
// not a ledger (spend is).
type logSink struct {
	mu      sync.Mutex
	w       *bufio.Writer
	pending bool // a timed flush is scheduled
}

const logFlushDelay = 100 * time.Millisecond

// logBufferBytes is the sink's buffer: a relay at 200,000 calls a second
// logs 45 MB/s, and each write to the file is a system call that wakes the
// Go runtime's monitor thread for a millisecond of polling; 256 KiB makes
// that a write every ~6 ms rather than every 0.7 ms (32 KiB), and the
// timer still flushes within logFlushDelay.
const logBufferBytes = 256 << 10

func newLogSink(out io.Writer) *logSink {
	return &logSink{w: bufio.NewWriterSize(out, logBufferBytes)}
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pending {
		s.pending = true
		time.AfterFunc(logFlushDelay, func() { _ = s.Sync() })
	}
	return s.w.Write(p)
}

func (s *logSink) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = false
	return s.w.Flush()
}
