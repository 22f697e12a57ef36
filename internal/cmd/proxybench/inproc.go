package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/logline"
	"github.com/delegateos/delegateos/internal/stdio"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/proxy"
	"github.com/delegateos/delegateos/receipt"
)

// inProcessProxy runs the proxy package the way `delegateos proxy --token
// @FILE --root ID --log FILE -- UPSTREAM` sets it up (no policy file, spend
// in memory, JSON log lines to a file), with the CPU profiled. It exists
// only to profile the proxy under the benchmark's load (-cpuprofile); the
// measurements of record use the real binary.
func inProcessProxy(args []string) int {
	fs := flag.NewFlagSet("proxybench proxy", flag.ContinueOnError)
	tokenFile := fs.String("token", "", "the session token's file")
	root := fs.String("root", "", "the trusted root")
	logFile := fs.String("log", "", "the log file")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile here")
	auditLog := fs.String("audit-log", "", "keep receipts in this audit log (as audit_log in a policy), signed with -key")
	keyFile := fs.String("key", "", "the proxy key that signs the audit log")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	upstream := fs.Args()
	if len(upstream) == 0 || *tokenFile == "" || *root == "" || *logFile == "" {
		fmt.Fprintln(os.Stderr, "usage: proxybench proxy -token FILE -root ID -log FILE [-cpuprofile FILE] [-audit-log FILE -key FILE] -- UPSTREAM...")
		return 2
	}
	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		return fail("proxy", err)
	}
	lf, err := os.OpenFile(*logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fail("proxy", err)
	}
	defer lf.Close()
	// Log lines are buffered and flushed within 100ms, as the CLI's sink
	// does, so that the profile shows the proxy's cost and not a write
	// per line.
	sink := &bufferedSink{w: bufio.NewWriterSize(lf, 32<<10)}
	defer sink.Sync()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = sink.Sync()
			case <-stop:
				return
			}
		}
	}()
	log := zap.New(logline.NewCore(sink, zapcore.InfoLevel))

	pol := policy.Default()
	pol.Roots = []string{*root}
	v, err := dct.NewVerifier(dct.Options{Roots: pol.Roots})
	if err != nil {
		return fail("proxy", err)
	}
	g := &gate.Gate{Policy: pol, Verifier: v, Budget: budget.NewMemory()}
	var evidence proxy.Evidence
	if *auditLog != "" {
		k, err := identity.LoadKeyFile(*keyFile)
		if err != nil {
			return fail("proxy", err)
		}
		d := sha256.Sum256(nil)
		l, err := audit.Open(*auditLog, receipt.NewSigner(k), audit.Options{Receipts: receipt.Options{PolicyHash: hex.EncodeToString(d[:])}})
		if err != nil {
			return fail("proxy", err)
		}
		defer l.Close()
		evidence = l
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fail("proxy", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail("proxy", err)
		}
		defer pprof.StopCPUProfile()
	}
	in, restoreIn := stdio.Pollable(os.Stdin, os.Stderr)
	defer restoreIn()
	out, restoreOut := stdio.Pollable(os.Stdout, os.Stderr)
	defer restoreOut()
	err = proxy.Run(context.Background(), proxy.Config{
		Upstream: upstream, Gate: g, SessionToken: strings.TrimSpace(string(tok)),
		MaxFrameBytes: pol.MaxFrameBytes, Log: log, Evidence: evidence,
	}, in, out)
	runtime.KeepAlive(in)
	runtime.KeepAlive(out)
	if err != nil {
		return fail("proxy", err)
	}
	return 0
}

// bufferedSink is a log sink whose lines reach the file when Sync flushes
// them.
type bufferedSink struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (s *bufferedSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *bufferedSink) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Flush()
}
