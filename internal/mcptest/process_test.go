//go:build unix

package mcptest_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// TestProxySession drives a proxy through both clients the package offers
// and reads its log.
func TestProxySession(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(mcptest.Budget(1000), "docs:read:/project/sub/**", "mcp:echo:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("echo", 100)), Token: tok})
	s := p.Connect(mcptest.SessionOptions{})

	res := s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"}).OK(t, "read_file")
	if got := mcptest.Text(t, res, 0); got != mcptest.Fixture(t, "project/sub/notes.md") {
		t.Errorf("read_file = %q", got)
	}
	r := s.Call(t, "read_file", map[string]any{"path": "/project/secret.md"})
	if r.Err == nil || r.RPC == nil || r.RPC.Code != -32001 || r.Frames != 1 {
		t.Errorf("an out-of-scope call: %+v", r)
	}
	// A token presented with the call is another session's: garbage is
	// refused as malformed.
	if r := s.CallAs(t, "garbage", "echo", map[string]any{"text": "x"}); r.RPC == nil || !strings.Contains(mcptest.MustJSON(r.RPC.Data), "malformed_token") {
		t.Errorf("a call with a garbage token: %+v", r)
	}
	// Extra params reach the upstream's echo only if the proxy passes them.
	s.SetExtraParams(map[string]any{"note": "kept"})
	res = s.Call(t, "echo", map[string]any{"text": "hello"}).OK(t, "echo")
	if got := mcptest.Text(t, res, 1); !strings.Contains(got, `"note":"kept"`) {
		t.Errorf("echo saw params %s; want the extra member", got)
	}
	got := p.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "echo" && m["allowed"] == true })
	if got["cost"] != 100.0 {
		t.Errorf("echo was logged as %v", got)
	}
	if n := len(p.LogWith("decision", nil)); n != 4 {
		t.Errorf("%d decisions logged, want 4", n)
	}
	pid := p.UpstreamPID()
	if mcptest.ProcessGone(pid) {
		t.Errorf("upstream pid %d does not exist", pid)
	}
	s.Close()
	if !p.WaitExit(mcptest.WaitTimeout) || p.ExitCode() != 0 || p.WaitErr() != nil {
		t.Fatalf("the proxy did not exit cleanly: %v", p.WaitErr())
	}
	if !mcptest.ProcessGone(pid) {
		t.Errorf("the upstream (pid %d) outlived the proxy", pid)
	}
}

func TestRaw(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*", "mcp:slow:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok, LogToStderr: true})
	c := p.Raw()
	c.Initialize()
	if m, ok := c.NextWithin(100 * time.Millisecond); ok {
		t.Errorf("a frame nobody asked for: %+v", m)
	}
	// One frame written in two pieces.
	frame := mcptest.CallFrame(`"a"`, "echo", map[string]any{"text": "in two"})
	c.Write([]byte(frame[:10]))
	c.Write([]byte(frame[10:] + "\n"))
	if got := mcptest.ResultText(t, c.Response(`"a"`)); got != "in two" {
		t.Errorf("echo = %q", got)
	}
	// Response skips the progress notifications before the response.
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"steps":2,"delay_ms":1},"_meta":{"progressToken":"p"}}}`)
	if got := mcptest.ResultText(t, c.Response("2")); got != "done 2" {
		t.Errorf("slow = %q", got)
	}
	c.Send("not json")
	if m := c.Response("null"); m.Error == nil || m.Error.Code != -32700 {
		t.Errorf("garbage was answered %+v", m.Error)
	}
	// The upstream (mcp-go) writes progress from another goroutine than
	// its answer, and drops what it has not written when its input ends:
	// all six frames are out before stdin closes.
	mcptest.Eventually(t, "six frames on stdout", func() bool { return p.Stdout.Frames() == 6 })
	p.Stdin.Close()
	if !p.WaitExit(mcptest.WaitTimeout) || !p.Stdout.WaitEOF(mcptest.WaitTimeout) {
		t.Fatal("the proxy did not exit after its stdin closed")
	}
	// initialize, echo, 2 progress notifications, slow, the parse error.
	if n := p.Stdout.Frames(); n != 6 {
		t.Errorf("%d frames, want 6", n)
	}
	if len(p.LogWith("decision", nil)) != 2 {
		t.Errorf("the decisions on stderr: %v", p.LogWith("decision", nil))
	}
}

// recorder is a testing.TB that records failures instead of failing, and
// runs its cleanups when told, to check what the harness reports.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errors) > 0
}

func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Log(...any)          {}

// run runs f as a test on r, then r's cleanups, and returns the failures.
func (r *recorder) run(f func(tb testing.TB)) []string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for i := len(r.cleanups) - 1; i >= 0; i-- {
				r.cleanups[i]()
			}
		}()
		f(r)
	}()
	<-done
	return r.errors
}

// TestCleanupChecks: what the harness checks when a test ends fails the
// test when it does not hold, and only then.
func TestCleanupChecks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		argv []string
		want func(int) bool
		fail string // "" if the process passes
	}{
		{"frames only", []string{"sh", "-c", `echo '{"jsonrpc":"2.0","method":"x"}'; cat >/dev/null`}, nil, ""},
		{"stray stdout", []string{"sh", "-c", "echo not a frame; cat >/dev/null"}, nil, "other than a JSON-RPC frame"},
		{"unterminated stdout", []string{"sh", "-c", `printf '{"jsonrpc":"2.0","method":"x"}'; cat >/dev/null`}, nil, "unterminated last line"},
		{"exit status", []string{"sh", "-c", "cat >/dev/null; exit 4"}, nil, "exited with status 4"},
		{"exit status wanted", []string{"sh", "-c", "cat >/dev/null; exit 4"}, func(c int) bool { return c == 4 }, ""},
		{"zero unwanted", []string{"sh", "-c", "cat >/dev/null"}, func(c int) bool { return c == 4 }, "exited with status 0"},
		{"race report", []string{"sh", "-c", "echo 'WARNING: DATA RACE' >&2; cat >/dev/null"}, nil, "race detector found a race"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &recorder{TB: t}
			errs := r.run(func(tb testing.TB) { mcptest.Start(tb, tt.argv, mcptest.StartOptions{WantExit: tt.want}) })
			if tt.fail == "" && len(errs) > 0 || tt.fail != "" && !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, tt.fail) }) {
				t.Errorf("the harness reported %q; want %q", errs, tt.fail)
			}
		})
	}
	t.Run("clean proxy", func(t *testing.T) {
		t.Parallel()
		r := &recorder{TB: t}
		errs := r.run(func(tb testing.TB) {
			e := mcptest.NewEnv(tb)
			e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy()}).Connect(mcptest.SessionOptions{Legacy: true})
		})
		if len(errs) > 0 {
			t.Errorf("a proxy that shut down cleanly: %q", errs)
		}
	})
	t.Run("upstream lingers", func(t *testing.T) {
		t.Parallel()
		// The upstream stays after its input closes: the proxy waits for it,
		// then terminates it, and exits 0.
		r := &recorder{TB: t}
		errs := r.run(func(tb testing.TB) {
			e := mcptest.NewEnv(tb)
			e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Wrap: []string{"sh", "-c", `"$@"; exec sleep 30`, "sh"}}).
				Connect(mcptest.SessionOptions{})
		})
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, "did not exit cleanly") }) {
			t.Errorf("the harness reported %q; want that the upstream did not exit by itself", errs)
		}
	})
}
