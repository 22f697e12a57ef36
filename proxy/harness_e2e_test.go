//go:build unix

package proxy_test

// The end-to-end harness: TestMain builds the real delegateos and docserver
// binaries once; each test mints its own keys and tokens, writes a policy
// file, starts `delegateos proxy ... -- docserver ...` on pipes it owns, and
// talks to it with mark3labs/mcp-go's client (or with raw JSON lines). Every
// byte the proxy writes to stdout is checked to be a JSON-RPC frame.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
)

// The binaries under test and the docserver's fixture tree.
var (
	delegateosBin string
	docserverBin  string
	fixtureDir    string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "delegateos-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	moduleRoot, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	delegateosBin = filepath.Join(dir, "delegateos")
	docserverBin = filepath.Join(dir, "docserver")
	fixtureDir = filepath.Join(moduleRoot, "examples", "docserver", "testdata")
	// The proxy is built with the race detector when the tests run with it,
	// so that a race in the relay fails the test that provoked it.
	if err := goBuild(moduleRoot, delegateosBin, "./cmd/delegateos", raceEnabled); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := goBuild(moduleRoot, docserverBin, "./examples/docserver", false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func goBuild(dir, out, pkg string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	// go test puts $GOROOT/bin first on PATH.
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, output)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Keys, tokens and policies.

// env is one test's world: a directory, a trusted root, the agent the root
// delegates to, and a fresh copy of the documents the docserver serves.
type env struct {
	t     *testing.T
	dir   string
	root  *identity.Keypair
	agent *identity.Keypair
	docs  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	docs := filepath.Join(dir, "docs")
	if err := os.CopyFS(docs, os.DirFS(fixtureDir)); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, dir: dir, root: newKey(t, "root"), agent: newKey(t, "agent"), docs: docs}
}

func newKey(t *testing.T, name string) *identity.Keypair {
	t.Helper()
	k, err := identity.Generate(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keyFile saves k for the CLI and returns its path.
func (e *env) keyFile(k *identity.Keypair) string {
	e.t.Helper()
	path := filepath.Join(e.dir, k.Name()+".key")
	if err := identity.SaveKeyFile(path, k); err != nil {
		e.t.Fatal(err)
	}
	return path
}

const testContract = "ct_e2e0000001"

func newDelegationID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "del_" + hex.EncodeToString(b[:])
}

func caps(t *testing.T, specs ...string) []dct.Capability {
	t.Helper()
	out := make([]dct.Capability, 0, len(specs))
	for _, s := range specs {
		c, err := dct.ParseCapability(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// mint issues a root token from e.root to e.agent for caps, with a budget of
// 1,000,000 microcents, one hour, depth 2; mod may change any of it.
func (e *env) mint(mod func(*dct.CreateParams), capSpecs ...string) *dct.Token {
	e.t.Helper()
	p := dct.CreateParams{
		Issuer:              e.root,
		Delegatee:           e.agent.ID(),
		Capabilities:        caps(e.t, capSpecs...),
		ContractID:          testContract,
		DelegationID:        newDelegationID(),
		MaxChainDepth:       2,
		MaxBudgetMicrocents: 1_000_000,
		ExpiresAt:           time.Now().Add(time.Hour),
	}
	if mod != nil {
		mod(&p)
	}
	tok, err := dct.Create(p)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

func budget(n int64) func(*dct.CreateParams) {
	return func(p *dct.CreateParams) { p.MaxBudgetMicrocents = n }
}

// attenuate narrows parent, held by from, for to.
func attenuate(t *testing.T, parent *dct.Token, from, to *identity.Keypair, budget int64, capSpecs ...string) *dct.Token {
	t.Helper()
	p := dct.AttenuateParams{Attenuator: from, Delegatee: to.ID(), DelegationID: newDelegationID(), MaxBudgetMicrocents: &budget}
	if len(capSpecs) > 0 {
		c := caps(t, capSpecs...)
		p.Capabilities = &c
	}
	tok, err := dct.Attenuate(parent, p)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// serialize encodes a hand-built token the way the protocol does: base64url
// of its canonical JSON (DelegateOS §3.2). Nothing checks it: that is the
// point of building one by hand.
func serialize(t *testing.T, st dct.SignedToken) string {
	t.Helper()
	b, err := canon.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return b64.Encode(b)
}

// signAttenuation signs attenuation i of st with k, as §3.4 defines the
// payload: canonical {attenuations[0..i], authority}.
func signAttenuation(t *testing.T, st *dct.SignedToken, i int, k *identity.Keypair) dct.Signature {
	t.Helper()
	payload := struct {
		Attenuations []dct.Attenuation `json:"attenuations"`
		Authority    dct.Authority     `json:"authority"`
	}{st.Attenuations[:i+1], st.Authority}
	s, err := sig.Sign(k.PrivateKey(), payload)
	if err != nil {
		t.Fatal(err)
	}
	return dct.Signature{Signer: k.ID(), Signature: s, Covers: dct.Covers(i)}
}

// rule is one entry of a policy's tool map.
type rule struct {
	match, namespace, action string
	arg                      string // JSON pointer to the resource argument; "" means "*"
	cost                     int64  // -1: not set (the default cost applies)
}

// docRules map the docserver's document tools to docs:read and docs:write
// on the path argument; the other tools keep the default mcp:<tool>:*.
func docRules() []rule {
	return []rule{
		{match: "read_file", namespace: "docs", action: "read", arg: "/path", cost: -1},
		{match: "list_files", namespace: "docs", action: "read", arg: "/path", cost: -1},
		{match: "search", namespace: "docs", action: "read", arg: "/path", cost: -1},
		{match: "write_file", namespace: "docs", action: "write", arg: "/path", cost: -1},
	}
}

// priced maps tool to mcp:<tool>:* at cost.
func priced(tool string, cost int64) rule {
	return rule{match: tool, namespace: "mcp", action: tool, cost: cost}
}

type policyFile struct {
	roots                []string
	rules                []rule
	defaultCost          int64
	allowUnauthenticated bool
	honourUpstreamCost   bool
	revocationList       string
	spendStore           string
	maxFrameBytes        int
	// extra is YAML appended as it is (e.g. a workspace section).
	extra string
}

func (p policyFile) yaml() string {
	var b strings.Builder
	q := strconv.Quote
	if len(p.roots) > 0 {
		b.WriteString("roots:\n")
		for _, r := range p.roots {
			fmt.Fprintf(&b, "  - %s\n", q(r))
		}
	}
	if len(p.rules) > 0 {
		b.WriteString("tools:\n")
		for _, r := range p.rules {
			fmt.Fprintf(&b, "  - match: %s\n    namespace: %s\n    action: %s\n", q(r.match), q(r.namespace), q(r.action))
			if r.arg != "" {
				fmt.Fprintf(&b, "    resource: {arg: %s}\n", q(r.arg))
			}
			if r.cost >= 0 {
				fmt.Fprintf(&b, "    cost: %d\n", r.cost)
			}
		}
	}
	fmt.Fprintf(&b, "default_cost: %d\n", p.defaultCost)
	fmt.Fprintf(&b, "allow_unauthenticated: %v\n", p.allowUnauthenticated)
	fmt.Fprintf(&b, "honour_upstream_cost: %v\n", p.honourUpstreamCost)
	if p.revocationList != "" {
		fmt.Fprintf(&b, "revocation_list: %s\n", q(p.revocationList))
	}
	if p.spendStore != "" {
		fmt.Fprintf(&b, "spend_store: %s\n", q(p.spendStore))
	}
	if p.maxFrameBytes > 0 {
		fmt.Fprintf(&b, "max_frame_bytes: %d\n", p.maxFrameBytes)
	}
	b.WriteString(p.extra)
	return b.String()
}

// policy is the usual policy: e.root trusted, the document tools mapped,
// and any further rules.
func (e *env) policy(extra ...rule) *policyFile {
	return &policyFile{roots: []string{e.root.ID()}, rules: append(docRules(), extra...)}
}

// ---------------------------------------------------------------------------
// The proxy process.

type proxyOptions struct {
	// bin is the delegateos binary to run; "" means delegateosBin.
	bin    string
	policy *policyFile // nil: no --policy
	roots  []string    // --root flags
	token  *dct.Token  // the session token (--token @FILE)
	// upstream are extra docserver flags (--diagnostics is always given).
	upstream []string
	// wrap is put before the docserver's command line, e.g. a shell that
	// does something first and then runs "$@".
	wrap []string
	// logToStderr leaves the log on the proxy's stderr instead of a file.
	logToStderr bool
	// wantExit is the exit status the proxy must end with; nil means 0.
	wantExit func(code int) bool
}

type proxyProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   *os.File
	out     *frameChecker
	stderr  *lockedBuffer
	logPath string
	exited  chan struct{}
	waitErr error
}

var proxyCount struct {
	sync.Mutex
	n int
}

func (e *env) startProxy(o proxyOptions) *proxyProc {
	t := e.t
	t.Helper()
	proxyCount.Lock()
	proxyCount.n++
	n := proxyCount.n
	proxyCount.Unlock()
	logPath := filepath.Join(e.dir, fmt.Sprintf("proxy-%d.log", n))
	args := []string{"proxy"}
	if !o.logToStderr {
		args = append(args, "--log", logPath)
	}
	if o.policy != nil {
		path := filepath.Join(e.dir, fmt.Sprintf("policy-%d.yaml", n))
		writeFile(t, path, o.policy.yaml())
		args = append(args, "--policy", path)
	}
	for _, r := range o.roots {
		args = append(args, "--root", r)
	}
	if o.token != nil {
		path := filepath.Join(e.dir, fmt.Sprintf("session-%d.tok", n))
		writeFile(t, path, o.token.String()+"\n")
		args = append(args, "--token", "@"+path)
	}
	args = append(args, "--")
	args = append(args, o.wrap...)
	args = append(args, docserverBin, "--root", e.docs, "--diagnostics")
	args = append(args, o.upstream...)

	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proxyProc{t: t, stdin: inW, stderr: &lockedBuffer{}, logPath: logPath, exited: make(chan struct{})}
	bin := delegateosBin
	if o.bin != "" {
		bin = o.bin
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = inR, outW, p.stderr
	// A race-enabled binary otherwise sleeps a second before exiting.
	p.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	p.out = newFrameChecker(outR)
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	wantExit := o.wantExit
	if wantExit == nil {
		wantExit = func(code int) bool { return code == 0 }
	}
	t.Cleanup(func() {
		p.stdin.Close()
		if !p.waitExit(20 * time.Second) {
			t.Errorf("the proxy did not exit within 20s of its stdin closing; killing it")
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		p.out.waitEOF(10 * time.Second)
		p.check(wantExit)
		outR.Close()
	})
	return p
}

// waitExit waits up to d for the proxy to exit.
func (p *proxyProc) waitExit(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

func (p *proxyProc) exitCode() int { return p.cmd.ProcessState.ExitCode() }

func (p *proxyProc) check(wantExit func(int) bool) {
	t := p.t
	t.Helper()
	if code := p.exitCode(); !wantExit(code) {
		t.Errorf("the proxy exited with status %d (%v)", code, p.waitErr)
	}
	for _, bad := range p.out.violations() {
		t.Errorf("the proxy wrote something other than a JSON-RPC frame to stdout: %s", bad)
	}
	if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
		t.Errorf("the race detector found a race in the proxy")
	}
	if t.Failed() {
		t.Logf("proxy stderr:\n%s", p.stderr)
		if log, err := os.ReadFile(p.logPath); err == nil {
			t.Logf("proxy log (%s):\n%s", p.logPath, clipLog(log))
		}
	}
}

func clipLog(b []byte) string {
	const max = 16 << 10
	if len(b) > max {
		return "...\n" + string(b[len(b)-max:])
	}
	return string(b)
}

// logEntries returns the proxy's log, one decoded JSON object per line. A
// line that is not JSON fails the test.
func (p *proxyProc) logEntries() []map[string]any {
	p.t.Helper()
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		p.t.Fatal(err)
	}
	var out []map[string]any
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			// The last line may be half written while the proxy runs.
			if i == len(bytes.Split(data, []byte("\n")))-1 {
				continue
			}
			p.t.Fatalf("log line %d is not JSON: %q", i+1, line)
		}
		out = append(out, m)
	}
	return out
}

// logWith returns the log entries with msg for which match holds.
func (p *proxyProc) logWith(msg string, match func(map[string]any) bool) []map[string]any {
	p.t.Helper()
	var out []map[string]any
	for _, m := range p.logEntries() {
		if m["msg"] == msg && (match == nil || match(m)) {
			out = append(out, m)
		}
	}
	return out
}

// waitLog polls the log until an entry with msg satisfies match.
func (p *proxyProc) waitLog(msg string, match func(map[string]any) bool) map[string]any {
	p.t.Helper()
	var found map[string]any
	eventually(p.t, 10*time.Second, "log entry "+msg, func() bool {
		if es := p.logWith(msg, match); len(es) > 0 {
			found = es[0]
			return true
		}
		return false
	})
	return found
}

// upstreamLogged matches the relayed upstream stderr lines containing s.
func upstreamLogged(s string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		line, _ := m["line"].(string)
		return strings.Contains(line, s)
	}
}

// upstreamPID is the docserver's process ID, from the proxy's log.
func (p *proxyProc) upstreamPID() int {
	p.t.Helper()
	m := p.waitLog("upstream started", nil)
	pid, ok := m["pid"].(float64)
	if !ok || pid <= 0 {
		p.t.Fatalf("upstream started entry without a pid: %v", m)
	}
	return int(pid)
}

// processGone reports whether pid no longer exists, not even as a zombie
// waiting to be reaped.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// ---------------------------------------------------------------------------
// stdout: nothing but JSON-RPC frames.

// frameChecker drains the proxy's stdout in the background, checks that
// every line is one JSON-RPC message, and hands the bytes to whoever reads
// it. Draining independently of the reader means a client that stops
// reading can never block the proxy, and every byte up to EOF is checked.
type frameChecker struct {
	mu      sync.Mutex
	cond    *sync.Cond
	unread  []byte
	err     error
	partial []byte
	bad     []string
	frames  int
	eof     chan struct{}
}

func newFrameChecker(r io.Reader) *frameChecker {
	c := &frameChecker{eof: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.pump(r)
	return c
}

func (c *frameChecker) pump(r io.Reader) {
	defer close(c.eof)
	buf := make([]byte, 256<<10)
	for {
		n, err := r.Read(buf)
		c.mu.Lock()
		c.scan(buf[:n])
		c.unread = append(c.unread, buf[:n]...)
		if err != nil {
			if len(c.partial) > 0 {
				c.bad = append(c.bad, fmt.Sprintf("an unterminated last line %q", clip(c.partial)))
			}
			c.err = err
		}
		c.cond.Broadcast()
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (c *frameChecker) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.partial = append(c.partial, b...)
			return
		}
		line := b[:i]
		if len(c.partial) > 0 {
			line = append(c.partial, line...)
		}
		if err := checkFrame(line); err != nil {
			c.bad = append(c.bad, fmt.Sprintf("%v: %q", err, clip(line)))
		} else {
			c.frames++
		}
		c.partial = c.partial[:0]
		b = b[i+1:]
	}
}

// checkFrame accepts exactly one JSON-RPC 2.0 request, notification or
// response.
func checkFrame(line []byte) error {
	line = bytes.TrimSuffix(line, []byte("\r"))
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return fmt.Errorf("not a JSON object (%v)", err)
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return errors.New(`jsonrpc is not "2.0"`)
	}
	_, hasMethod := m["method"]
	_, hasID := m["id"]
	_, hasResult := m["result"]
	_, hasError := m["error"]
	switch {
	case hasMethod && !hasResult && !hasError:
		return nil
	case !hasMethod && hasID && hasResult != hasError:
		return nil
	}
	return errors.New("neither a request, a notification nor a response")
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

func (c *frameChecker) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.unread) == 0 && c.err == nil {
		c.cond.Wait()
	}
	if len(c.unread) == 0 {
		return 0, c.err
	}
	n := copy(p, c.unread)
	c.unread = c.unread[n:]
	if len(c.unread) == 0 {
		c.unread = nil
	}
	return n, nil
}

func (c *frameChecker) waitEOF(d time.Duration) {
	select {
	case <-c.eof:
	case <-time.After(d):
	}
}

func (c *frameChecker) frameCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frames
}

func (c *frameChecker) violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.bad)
}

// ---------------------------------------------------------------------------
// The MCP client side.

// session is an mcp-go client connected to a proxy.
type session struct {
	*client.Client
	wire *wireTransport
	p    *proxyProc

	mu    sync.Mutex
	notes []mcp.JSONRPCNotification
}

type sessionOptions struct {
	// legacy pins protocol 2025-11-25, where server-to-client requests
	// (sampling, roots, elicitation) cross the wire as requests. Otherwise
	// mcp-go negotiates 2026-07-28.
	legacy     bool
	clientOpts []client.ClientOption
}

func eraName(legacy bool) string {
	if legacy {
		return mcp.ProtocolVersion20251125
	}
	return mcp.ProtocolVersion20260728
}

func (p *proxyProc) connect(o sessionOptions) *session {
	t := p.t
	t.Helper()
	stdio := transport.NewIO(p.out, p.stdin, nil)
	wire := &wireTransport{BidirectionalInterface: stdio}
	opts := o.clientOpts
	if o.legacy {
		opts = append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	} else {
		// mcp-go falls back to 2025-11-25 if server/discover takes over
		// 5s, which a loaded machine can take: wait as long as the test.
		opts = append(opts, client.WithDiscoverTimeout(-1))
	}
	s := &session{Client: client.NewClient(wire, opts...), wire: wire, p: p}
	t.Cleanup(func() { _ = s.Close() })
	ctx := testContext(t)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s.OnNotification(func(n mcp.JSONRPCNotification) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.notes = append(s.notes, n)
	})
	_, err := s.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "delegateos-e2e", Version: "0"},
	}})
	if err != nil {
		t.Fatalf("initialize through the proxy: %v", err)
	}
	if got, want := s.ProtocolVersion(), eraName(o.legacy); got != want {
		t.Fatalf("negotiated protocol %q through the proxy, want %q", got, want)
	}
	return s
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// result is the outcome of one tools/call.
type result struct {
	res *mcp.CallToolResult
	err error
	// rpc is the JSON-RPC error the call was answered with, if any.
	rpc *mcp.JSONRPCErrorDetails
	// frames is how many tools/call requests the call took (2026-07-28
	// sends the call again with the client's input).
	frames int
}

// callCapture travels in a call's context to the wire transport.
type callCapture struct {
	extra map[string]any // extra top-level params for every tools/call frame

	mu     sync.Mutex
	rpc    *mcp.JSONRPCErrorDetails
	frames int
}

type captureKey struct{}

func callRequest(name string, args map[string]any) mcp.CallToolRequest {
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	return req
}

// callExtra sends req with extra top-level params (such as _delegateos)
// added to the tools/call frame.
func (s *session) callExtra(ctx context.Context, req mcp.CallToolRequest, extra map[string]any) result {
	c := &callCapture{extra: extra}
	ctx = context.WithValue(ctx, captureKey{}, c)
	res, err := s.CallTool(ctx, req)
	c.mu.Lock()
	defer c.mu.Unlock()
	return result{res: res, err: err, rpc: c.rpc, frames: c.frames}
}

// call calls a tool with the session's token.
func (s *session) call(t *testing.T, name string, args map[string]any) result {
	return s.callExtra(testContext(t), callRequest(name, args), nil)
}

// callAs calls a tool presenting tok in params._delegateos.
func (s *session) callAs(t *testing.T, tok string, name string, args map[string]any) result {
	return s.callExtra(testContext(t), callRequest(name, args), delegateos(tok))
}

// delegateos is the extra params that carry tok (DelegateOS §11.1).
func delegateos(tok string) map[string]any {
	return map[string]any{"_delegateos": map[string]any{"dct": tok}}
}

func (s *session) notifications(method string) []mcp.JSONRPCNotification {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []mcp.JSONRPCNotification
	for _, n := range s.notes {
		if n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

// wireTransport sits between mcp-go's client and its stdio transport: it
// adds extra params to tools/call frames (mcp.CallToolParams has no field
// for _delegateos), keeps the JSON-RPC error a call was answered with, and
// records the requests the server sent to the client.
type wireTransport struct {
	transport.BidirectionalInterface

	mu       sync.Mutex
	incoming []string
}

func (w *wireTransport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	c, _ := ctx.Value(captureKey{}).(*callCapture)
	if req.Method == string(mcp.MethodToolsCall) && c != nil {
		if len(c.extra) > 0 {
			params, err := withExtraParams(req.Params, c.extra)
			if err != nil {
				return nil, err
			}
			req.Params = params
		}
		c.mu.Lock()
		c.frames++
		c.mu.Unlock()
	}
	resp, err := w.BidirectionalInterface.SendRequest(ctx, req)
	if c != nil && resp != nil && resp.Error != nil {
		c.mu.Lock()
		c.rpc = resp.Error
		c.mu.Unlock()
	}
	return resp, err
}

// withExtraParams re-encodes params, a struct or a map depending on the
// protocol era, as an object with extra members.
func withExtraParams(params any, extra map[string]any) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if fields[k], err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	return fields, nil
}

func (w *wireTransport) SetRequestHandler(handler transport.RequestHandler) {
	w.BidirectionalInterface.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		w.mu.Lock()
		w.incoming = append(w.incoming, req.Method)
		w.mu.Unlock()
		return handler(ctx, req)
	})
}

func (w *wireTransport) incomingMethods() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.incoming)
}

// ---------------------------------------------------------------------------
// Assertions.

// ok requires a successful call and returns its result.
func ok(t *testing.T, r result, what string) *mcp.CallToolResult {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: %v (JSON-RPC error %+v)", what, r.err, r.rpc)
	}
	if r.res.IsError {
		t.Fatalf("%s: the tool failed: %+v", what, r.res.Content)
	}
	return r.res
}

func text(t *testing.T, res *mcp.CallToolResult, i int) string {
	t.Helper()
	if len(res.Content) <= i {
		t.Fatalf("result has %d content items, want item %d", len(res.Content), i)
	}
	tc, ok := mcp.AsTextContent(res.Content[i])
	if !ok {
		t.Fatalf("content %d is %T, not text", i, res.Content[i])
	}
	return tc.Text
}

// denial is the error data a refused call must carry (DelegateOS §11.2).
type denial struct {
	typ dct.DenialType
	// detail is a substring the detail must contain; the detail must never
	// be empty.
	detail    string
	requested dct.Capability
	// granted is the token's capabilities as the proxy reports them; nil
	// means the member must be absent (the token never verified).
	granted []dct.Capability
}

// denialMembers are the only members the error data may have.
var denialMembers = []string{"type", "detail", "requested", "granted"}

// isDenial reports whether r was refused by the gate with type typ.
func isDenial(r result, typ dct.DenialType) bool {
	if r.rpc == nil || r.rpc.Code != -32001 {
		return false
	}
	raw, _ := json.Marshal(r.rpc.Data)
	var data struct {
		Type dct.DenialType `json:"type"`
	}
	return json.Unmarshal(raw, &data) == nil && data.Type == typ
}

func checkDenial(t *testing.T, r result, want denial) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("the call succeeded (%+v); want a %s denial", r.res.Content, want.typ)
	}
	if r.rpc == nil {
		t.Fatalf("the call failed with %v, not a JSON-RPC error; want a %s denial", r.err, want.typ)
	}
	if r.rpc.Code != -32001 || r.rpc.Message != "DCT verification failed" {
		t.Errorf("error code %d message %q; want -32001 \"DCT verification failed\"", r.rpc.Code, r.rpc.Message)
	}
	raw, err := json.Marshal(r.rpc.Data)
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatalf("error data is not an object: %s", raw)
	}
	for k := range data {
		if !slices.Contains(denialMembers, k) {
			t.Errorf("error data has member %q; only %v are defined (data %s)", k, denialMembers, raw)
		}
	}
	var typ, detail string
	if json.Unmarshal(data["type"], &typ) != nil || typ != string(want.typ) {
		t.Errorf("data.type = %s, want %q (data %s)", data["type"], want.typ, raw)
	}
	if json.Unmarshal(data["detail"], &detail) != nil || detail == "" || !strings.Contains(detail, want.detail) {
		t.Errorf("data.detail = %s, want one containing %q", data["detail"], want.detail)
	}
	if got, ok := capabilityJSON(data["requested"]); !ok || got != want.requested {
		t.Errorf("data.requested = %s, want %s", data["requested"], mustJSON(want.requested))
	}
	switch raw, present := data["granted"]; {
	case want.granted == nil && present:
		t.Errorf("data.granted = %s; want it absent", raw)
	case want.granted != nil:
		var got []map[string]string
		if json.Unmarshal(raw, &got) != nil || len(got) != len(want.granted) {
			t.Errorf("data.granted = %s, want %s", raw, mustJSON(want.granted))
			break
		}
		for i, c := range got {
			if len(c) != 3 || c["namespace"] != want.granted[i].Namespace || c["action"] != want.granted[i].Action || c["resource"] != want.granted[i].Resource {
				t.Errorf("data.granted = %s, want %s", raw, mustJSON(want.granted))
				break
			}
		}
	}
}

// capabilityJSON reads {namespace, action, resource} and nothing else.
func capabilityJSON(raw json.RawMessage) (dct.Capability, bool) {
	var m map[string]string
	if json.Unmarshal(raw, &m) != nil || len(m) != 3 {
		return dct.Capability{}, false
	}
	return dct.Capability{Namespace: m["namespace"], Action: m["action"], Resource: m["resource"]}, true
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// eventually polls cond every 10ms until it holds or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runCLI runs the delegateos command and returns its stdout, stderr and
// exit status.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(delegateosBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10")
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ---------------------------------------------------------------------------
// Raw JSON lines, for what mcp-go's client cannot send.

type rawConn struct {
	t     *testing.T
	p     *proxyProc
	lines chan []byte
}

func (p *proxyProc) raw() *rawConn {
	c := &rawConn{t: p.t, p: p, lines: make(chan []byte, 1024)}
	go func() {
		defer close(c.lines)
		r := bufio.NewReaderSize(p.out, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				c.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

func (c *rawConn) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.p.stdin, line+"\n"); err != nil {
		c.t.Fatalf("writing to the proxy: %v", err)
	}
}

type rawMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// next returns the next frame from the proxy.
func (c *rawConn) next() rawMessage {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the proxy closed its stdout")
		}
		var m rawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			c.t.Fatalf("frame from the proxy is not JSON: %q", clip(line))
		}
		return m
	case <-time.After(30 * time.Second):
		c.t.Fatal("no frame from the proxy within 30s")
	}
	panic("unreachable")
}

// response skips notifications and returns the next response; it must
// have the given id (raw JSON).
func (c *rawConn) response(id string) rawMessage {
	c.t.Helper()
	for {
		m := c.next()
		if m.Method != "" {
			continue
		}
		if string(m.ID) != id {
			c.t.Fatalf("response with id %s, want %s", m.ID, id)
		}
		return m
	}
}

// initialize performs the 2025-11-25 handshake.
func (c *rawConn) initialize() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m := c.response(`"init"`); m.Error != nil {
		c.t.Fatalf("initialize: %+v", m.Error)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// callFrame is a tools/call request line.
func callFrame(id, tool string, args map[string]any) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, mustJSON(args))
}

// resultText is the first text item of a raw tools/call result.
func resultText(t *testing.T, m rawMessage) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("error %d %s", m.Error.Code, m.Error.Message)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 || r.IsError {
		t.Fatalf("unexpected result %s", clip(m.Result))
	}
	return r.Content[0].Text
}
