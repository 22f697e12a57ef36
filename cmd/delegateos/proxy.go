package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/logline"
	"github.com/delegateos/delegateos/internal/stdio"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/proxy"
	"github.com/delegateos/delegateos/revocation"
)

var proxyCmd = &command{
	name: "proxy",
	args: "[--policy FILE] [--token TOKEN] [--root ID]... [--log FILE] [--revocations FILE] [--spend-store FILE]\n" +
		"                    -- UPSTREAM_COMMAND [ARGS...]",
	summary: "run an MCP server behind the DCT gate: point your MCP client at this command",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		fs.SetInterspersed(false) // everything from the upstream command on is its own
		policyPath := fs.String("policy", "", "the policy file (default: built-in defaults; see 'delegateos policy init')")
		token := fs.String("token", "", "the session's DCT, or @FILE (default: $DELEGATEOS_TOKEN); calls may also carry their own in params._delegateos")
		roots := fs.StringArray("root", nil, "a trusted root principal ID or did:key (repeatable; added to the policy's roots)")
		logFile := fs.String("log", "", "log to this file instead of standard error (overrides the policy)")
		revs := fs.String("revocations", "", "a revocation list file, looked at on every call (overrides the policy)")
		spend := fs.String("spend-store", "", "where spend is recorded so it survives restarts (overrides the policy)")
		return func(e *env, args []string) error {
			if len(args) == 0 {
				return usagef("give the upstream MCP server's command after --, e.g. delegateos proxy -- npx server")
			}
			pol := policy.Default()
			if *policyPath != "" {
				p, err := policy.Load(*policyPath)
				if err != nil {
					return inputError{err}
				}
				pol = p
			}
			for _, r := range *roots {
				id, err := principal("--root", r)
				if err != nil {
					return err
				}
				pol.Roots = append(pol.Roots, id)
			}
			if *logFile != "" {
				pol.Log.File = *logFile
			}
			if *revs != "" {
				pol.RevocationList = *revs
			}
			if *spend != "" {
				pol.SpendStore = *spend
			}
			log, closeLog, err := newLogger(e, pol.Log)
			if err != nil {
				return inputError{err}
			}
			defer closeLog()

			if *token == "" {
				*token = os.Getenv("DELEGATEOS_TOKEN")
			}
			// The upstream inherits this process's environment: it must not
			// receive the session's token, whatever the token grants it.
			os.Unsetenv("DELEGATEOS_TOKEN")
			if *token == "-" {
				return usagef("--token - is not possible: standard input carries the MCP protocol")
			}
			sessionToken := ""
			if *token != "" {
				if sessionToken, err = readToken(e, *token); err != nil {
					return err
				}
			}
			if len(pol.Roots) == 0 && !pol.AllowUnauthenticated {
				return usagef("no trusted roots: give --root or list roots in the policy file")
			}
			gate := &proxy.Gate{Policy: pol}
			opts := dct.Options{Roots: pol.Roots}
			var revs *revocation.File
			if pol.RevocationList != "" {
				if revs, err = revocation.OpenFile(pol.RevocationList); err != nil {
					return inputError{err}
				}
				defer revs.Close()
				opts.Revocations = revs
			}
			if len(opts.Roots) > 0 {
				if gate.Verifier, err = dct.NewVerifier(opts); err != nil {
					return usageError{err.Error()}
				}
			}
			if pol.SpendStore != "" {
				store, err := budget.OpenFile(pol.SpendStore)
				if err != nil {
					return inputError{err}
				}
				defer store.Close()
				gate.Budget = store
			} else {
				log.Warn("spend is kept in memory only and resets when the proxy restarts; set spend_store in the policy or --spend-store to keep it")
				gate.Budget = budget.NewMemory()
			}
			if sessionToken != "" {
				if gate.Verifier == nil {
					return usagef("a token needs a trusted root: give --root or list roots in the policy file")
				}
				if _, err := gate.Verifier.VerifyChain(sessionToken, time.Now()); err != nil {
					return usagef("the session token is not valid: %v", err)
				}
			}
			delegations, closeDelegations, err := openDelegations(pol, gate.Verifier, revs, gate.Budget, log)
			if err != nil {
				return inputError{err}
			}
			defer closeDelegations()
			if delegations != nil {
				gate.Ended = delegations.Ended
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
			err = proxy.Run(context.Background(), proxy.Config{
				Upstream: args, Gate: gate, SessionToken: sessionToken, Delegations: delegations,
				MaxFrameBytes: pol.MaxFrameBytes, HonourUpstreamCost: pol.HonourUpstreamCost,
				Log: log, Signals: sigs,
			}, in, out)
			var exit *proxy.UpstreamExitError
			if errors.As(err, &exit) {
				return checkError{exit.Error()}
			}
			if err != nil {
				return inputError{err}
			}
			return nil
		}
	},
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
	sink := &logSink{w: bufio.NewWriterSize(out, 32<<10)}
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
