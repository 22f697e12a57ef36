package mcptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
)

// Process is a process speaking MCP over stdio on pipes the test owns: a
// delegateos proxy, or an MCP server under test. Talk to it through
// Connect (mcp-go's client) or Raw (exact bytes), one at a time.
type Process struct {
	t testing.TB
	// Cmd is the running command.
	Cmd *exec.Cmd
	// Stdin is the process's standard input; closing it is the client's
	// EOF.
	Stdin *os.File
	// Stdout checks and holds what the process writes to its stdout.
	Stdout *FrameChecker
	// Stderr is everything the process wrote to its stderr.
	Stderr *Buffer
	// LogPath is the proxy's --log file; "" if it logs to Stderr.
	LogPath string

	exited  chan struct{}
	waitErr error
}

// StartOptions are how Start runs a process.
type StartOptions struct {
	// Env is added to the test's environment.
	Env []string
	// LogPath is the file the process logs to, if not its stderr.
	LogPath string
	// WantExit is the exit status the process must end with; nil means 0,
	// and, for a proxy, that its upstream exited by itself once the proxy
	// closed its input.
	WantExit func(code int) bool
}

// Start runs argv with pipes for its stdin and stdout and a Buffer for its
// stderr. When the test ends the process's stdin is closed; it must then
// exit within 20s (or it is killed) with the status o.WantExit wants, having
// written nothing but JSON-RPC frames to stdout and no race report to
// stderr. Of a proxy (a process whose log says "upstream started") the
// upstream must be gone too. If the test failed, the process's stderr and
// log are logged.
func Start(t testing.TB, argv []string, o StartOptions) *Process {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{t: t, Stdin: inW, Stderr: &Buffer{}, LogPath: o.LogPath, exited: make(chan struct{})}
	p.Cmd = exec.Command(argv[0], argv[1:]...)
	p.Cmd.Stdin, p.Cmd.Stdout, p.Cmd.Stderr = inR, outW, p.Stderr
	p.Cmd.Env = append(os.Environ(), "GORACE="+goraceValue())
	p.Cmd.Env = append(p.Cmd.Env, o.Env...)
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	p.Stdout = NewFrameChecker(outR)
	go func() {
		p.waitErr = p.Cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Stdin.Close()
		if !p.WaitExit(20 * time.Second) {
			t.Errorf("%s did not exit within 20s of its stdin closing; killing it", filepath.Base(argv[0]))
			_ = p.Cmd.Process.Kill()
			<-p.exited
		}
		p.Stdout.WaitEOF(WaitTimeout)
		p.check(o.WantExit)
		outR.Close()
	})
	return p
}

// ProxyOptions are how StartProxy runs delegateos proxy.
type ProxyOptions struct {
	// Policy is written to a file and given as --policy.
	Policy *Policy
	// Token is written to a file and given as --token @FILE.
	Token *dct.Token
	// Roots are given as --root flags.
	Roots []string
	// Flags are further flags of delegateos proxy.
	Flags []string
	// Upstream is the upstream's command line. If empty, it is the
	// docserver with --diagnostics serving Docs, and DocserverArgs.
	Upstream      []string
	DocserverArgs []string
	// Docs is the docserver's --root; if empty, a fresh copy of
	// FixtureDir in Dir.
	Docs string
	// Wrap is put before the upstream's command line: a shell that does
	// something first and then runs "$@", say.
	Wrap []string
	// Dir is where the policy, token and log files go; t.TempDir() if
	// empty.
	Dir string
	// LogToStderr leaves the proxy's log on its stderr instead of a file.
	LogToStderr bool
	// Env is added to the proxy's environment.
	Env []string
	// Bin is the delegateos binary to run; empty means Delegateos(t).
	Bin string
	// WantExit is as in StartOptions.
	WantExit func(code int) bool
}

// proxies numbers the proxies started, for their file names.
var proxies atomic.Int64

// StartProxy starts delegateos proxy as o says, logging to a file unless
// o.LogToStderr. It is Start for a proxy.
func StartProxy(t testing.TB, o ProxyOptions) *Process {
	t.Helper()
	n := proxies.Add(1)
	dir := o.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	bin := o.Bin
	if bin == "" {
		bin = Delegateos(t)
	}
	args := []string{bin, "proxy"}
	var logPath string
	if !o.LogToStderr {
		logPath = filepath.Join(dir, fmt.Sprintf("proxy-%d.log", n))
		args = append(args, "--log", logPath)
	}
	if o.Policy != nil {
		path := filepath.Join(dir, fmt.Sprintf("policy-%d.yaml", n))
		WriteFile(t, path, o.Policy.YAML())
		args = append(args, "--policy", path)
	}
	for _, r := range o.Roots {
		args = append(args, "--root", r)
	}
	if o.Token != nil {
		path := filepath.Join(dir, fmt.Sprintf("session-%d.tok", n))
		WriteFile(t, path, o.Token.String()+"\n")
		args = append(args, "--token", "@"+path)
	}
	args = append(args, o.Flags...)
	args = append(args, "--")
	args = append(args, o.Wrap...)
	if len(o.Upstream) > 0 {
		args = append(args, o.Upstream...)
	} else {
		docs := o.Docs
		if docs == "" {
			docs = CopyFixture(t, filepath.Join(dir, fmt.Sprintf("docs-%d", n)))
		}
		args = append(args, Docserver(t), "--root", docs, "--diagnostics")
		args = append(args, o.DocserverArgs...)
	}
	// Each test's proxies remember their Redis stores' identities in the
	// test's own directory (a port is reused by the next test's Redis).
	env := append([]string{"DELEGATEOS_STATE_DIR=" + filepath.Join(dir, "state")}, o.Env...)
	return Start(t, args, StartOptions{Env: env, LogPath: logPath, WantExit: o.WantExit})
}

// StartProxy is StartProxy with o.Dir and o.Docs defaulting to e's.
func (e *Env) StartProxy(o ProxyOptions) *Process {
	e.t.Helper()
	if o.Dir == "" {
		o.Dir = e.Dir
	}
	if o.Docs == "" {
		o.Docs = e.Docs
	}
	return StartProxy(e.t, o)
}

// WaitExit waits up to d for the process to exit and reports whether it
// has.
func (p *Process) WaitExit(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// ExitCode is the process's exit status, once it has exited (-1 if a
// signal ended it).
func (p *Process) ExitCode() int { return p.Cmd.ProcessState.ExitCode() }

// WaitErr is what waiting for the process returned: nil while it runs.
func (p *Process) WaitErr() error {
	select {
	case <-p.exited:
		return p.waitErr
	default:
		return nil
	}
}

func (p *Process) check(wantExit func(int) bool) {
	t := p.t
	t.Helper()
	code := p.ExitCode()
	if wantExit == nil && code != 0 || wantExit != nil && !wantExit(code) {
		t.Errorf("%s exited with status %d (%v)", filepath.Base(p.Cmd.Path), code, p.waitErr)
	}
	for _, bad := range p.Stdout.Violations() {
		t.Errorf("%s wrote something other than a JSON-RPC frame to stdout: %s", filepath.Base(p.Cmd.Path), bad)
	}
	if strings.Contains(p.Stderr.String(), "WARNING: DATA RACE") {
		t.Errorf("the race detector found a race in %s", filepath.Base(p.Cmd.Path))
	}
	if started := p.logEntries(false, "upstream started", nil); len(started) > 0 {
		if pid, ok := started[0]["pid"].(float64); ok && pid > 0 && !gone(int(pid)) {
			t.Errorf("the upstream (pid %d) outlived the proxy; killing it", int(pid))
			kill(int(pid))
		}
		// The client closed the proxy's input: the proxy closed the
		// upstream's, and the upstream exited by itself, in time.
		if log := p.Log(); wantExit == nil && !t.Failed() &&
			(!strings.Contains(log, `"msg":"upstream exited after the client closed"`) || strings.Contains(log, "terminating it")) {
			t.Errorf("the proxy and its upstream did not exit cleanly after the client closed")
		}
	}
	if t.Failed() {
		t.Logf("%s stderr:\n%s", filepath.Base(p.Cmd.Path), clipLog(p.Stderr.String()))
		if p.LogPath != "" {
			t.Logf("proxy log (%s):\n%s", p.LogPath, clipLog(p.Log()))
		}
	}
}

func clipLog(s string) string {
	const max = 16 << 10
	if len(s) > max {
		return "...\n" + s[len(s)-max:]
	}
	return s
}

// Log is what the proxy has logged so far: its log file, or its stderr.
func (p *Process) Log() string {
	if p.LogPath == "" {
		return p.Stderr.String()
	}
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// LogWith returns the log entries, one decoded JSON object per line, whose
// msg is msg and for which match (if not nil) holds. A line of a log file
// that is not JSON fails the test, but for the last one, which may be half
// written; a log on stderr may hold other lines, which are skipped.
func (p *Process) LogWith(msg string, match func(map[string]any) bool) []map[string]any {
	p.t.Helper()
	return p.logEntries(p.LogPath != "", msg, match)
}

func (p *Process) logEntries(strict bool, msg string, match func(map[string]any) bool) []map[string]any {
	p.t.Helper()
	var data []byte
	if p.LogPath == "" {
		data = []byte(p.Stderr.String())
	} else {
		var err error
		if data, err = os.ReadFile(p.LogPath); err != nil && strict {
			p.t.Fatal(err)
		}
	}
	lines := bytes.Split(data, []byte("\n"))
	var out []map[string]any
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			if strict && i != len(lines)-1 {
				p.t.Fatalf("log line %d is not JSON: %q", i+1, line)
			}
			continue
		}
		if m["msg"] == msg && (match == nil || match(m)) {
			out = append(out, m)
		}
	}
	return out
}

// WaitLog waits up to WaitTimeout for a log entry with msg for which match
// (if not nil) holds, and returns the first.
func (p *Process) WaitLog(msg string, match func(map[string]any) bool) map[string]any {
	p.t.Helper()
	var found map[string]any
	Eventually(p.t, "log entry "+msg, func() bool {
		if es := p.LogWith(msg, match); len(es) > 0 {
			found = es[0]
			return true
		}
		return false
	})
	return found
}

// UpstreamLogged matches the relayed upstream stderr lines (log entries
// "upstream stderr") that contain s.
func UpstreamLogged(s string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		line, _ := m["line"].(string)
		return strings.Contains(line, s)
	}
}

// UpstreamPID is the proxy's upstream's process ID, from its log.
func (p *Process) UpstreamPID() int {
	p.t.Helper()
	m := p.WaitLog("upstream started", nil)
	pid, ok := m["pid"].(float64)
	if !ok || pid <= 0 {
		p.t.Fatalf("upstream started entry without a pid: %v", m)
	}
	return int(pid)
}
