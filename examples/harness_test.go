// Package examples tests the example configurations in this directory
// against the published MCP servers they are written for:
// @modelcontextprotocol/server-filesystem and
// @modelcontextprotocol/server-everything, pinned in npm/package.json and
// npm/package-lock.json and installed from the npm registry with npm ci.
// Every test runs the real delegateos binary, built in TestMain, between
// mark3labs/mcp-go's client and the real server running under Node.js.
//
// The tests need Node.js 20+ and npm; without them they fail, they never
// skip.
package examples

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

var (
	// repo is the repository root; npmDir holds the pinned packages.
	repo, npmDir string
	// delegateos is the binary built for the tests, alone in binDir.
	delegateos, binDir string
	// pins are the exact versions npm/package.json pins, by package name.
	pins map[string]string
)

// servers are the published packages under test and their entry points
// (the "bin" of their package.json).
var servers = map[string]string{
	"@modelcontextprotocol/server-filesystem": "dist/index.js",
	"@modelcontextprotocol/server-everything": "dist/index.js",
}

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "delegateos-examples-")
	if err == nil {
		err = setup(tmp)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "examples: %v\n", err)
		os.RemoveAll(tmp)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// setup builds delegateos and installs the pinned npm packages if they are
// not installed at the pinned versions already.
func setup(tmp string) error {
	var err error
	if repo, err = filepath.Abs(".."); err != nil {
		return err
	}
	npmDir = filepath.Join(repo, "examples", "npm")
	binDir = filepath.Join(tmp, "bin")
	delegateos = filepath.Join(binDir, "delegateos")
	build := exec.Command("go", "build", "-o", delegateos, "./cmd/delegateos")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/delegateos: %v\n%s", err, out)
	}

	var pkg struct{ Dependencies map[string]string }
	if err := readJSON(filepath.Join(npmDir, "package.json"), &pkg); err != nil {
		return err
	}
	pins = pkg.Dependencies
	for name := range servers {
		if pins[name] == "" {
			return fmt.Errorf("npm/package.json does not pin %s", name)
		}
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("these tests run published MCP servers from the npm registry and need Node.js 20+ and npm: %v", err)
		}
	}
	if installedVersions() == nil {
		return nil
	}
	ci := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	ci.Dir = npmDir
	if out, err := ci.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %v\n%s", npmDir, err, out)
	}
	return installedVersions()
}

// installedVersions checks that every server is installed at its pin.
func installedVersions() error {
	for name, entry := range servers {
		var pkg struct{ Version string }
		if err := readJSON(filepath.Join(npmDir, "node_modules", name, "package.json"), &pkg); err != nil {
			return err
		}
		if pkg.Version != pins[name] {
			return fmt.Errorf("%s %s is installed, not %s", name, pkg.Version, pins[name])
		}
		if _, err := os.Stat(filepath.Join(npmDir, "node_modules", name, entry)); err != nil {
			return err
		}
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

// serverCommand is how the tests start a pinned package: node and its entry
// point, never npx, which would go to the network.
func serverCommand(pkg string, args ...string) []string {
	return append([]string{"node", filepath.Join(npmDir, "node_modules", pkg, servers[pkg])}, args...)
}

// run runs delegateos and returns its standard output; it fails the test
// unless the exit status is want.
func run(t *testing.T, want int, args ...string) string {
	t.Helper()
	cmd := exec.Command(delegateos, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != want {
		t.Fatalf("delegateos %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, &stdout, &stderr)
	}
	return stdout.String()
}

// principal is a key made with delegateos keygen.
type principal struct{ key, id string }

func keygen(t *testing.T, dir, name string) principal {
	t.Helper()
	key := filepath.Join(dir, name+".key")
	run(t, 0, "keygen", "--out", key, "--name", name)
	return principal{key: key, id: strings.TrimSpace(run(t, 0, "id", "--key", key))}
}

// mint has root grant caps to a fresh agent with budget and returns the
// token as an @FILE argument for --token.
func mint(t *testing.T, dir string, root principal, budget int64, caps ...string) string {
	t.Helper()
	agent := keygen(t, dir, fmt.Sprintf("agent%d", time.Now().UnixNano()))
	args := []string{"dct", "mint", "--key", root.key, "--to", agent.id, "--contract", "ct_examples",
		"--budget", fmt.Sprint(budget), "--ttl", "1h", "--max-depth", "1"}
	for _, c := range caps {
		args = append(args, "--cap", c)
	}
	tok := agent.key + ".tok"
	if err := os.WriteFile(tok, []byte(run(t, 0, args...)), 0o600); err != nil {
		t.Fatal(err)
	}
	return "@" + tok
}

// exampleDir copies an example's files into a fresh directory, as a user
// following its README would, and sets the policy's roots.
func exampleDir(t *testing.T, name string, roots ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"policy.yaml", "mcp-client.json"} {
		b, err := os.ReadFile(filepath.Join(name, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "policy.yaml" {
			b = setRoots(t, b, roots)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "revocations.json"), []byte("[]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// setRoots replaces the example policy's "roots: []" line, which must be
// there: the READMEs tell people to edit exactly that line.
func setRoots(t *testing.T, policy []byte, roots []string) []byte {
	t.Helper()
	const empty = "\nroots: []\n"
	if bytes.Count(policy, []byte(empty)) != 1 {
		t.Fatalf("the example policy has no single line %q", strings.TrimSpace(empty))
	}
	return bytes.Replace(policy, []byte(empty), []byte("\nroots: ["+strings.Join(roots, ", ")+"]\n"), 1)
}

// session is an MCP client connected to delegateos proxy.
type session struct {
	*client.Client
	wire   *wire
	stderr *lockedBuffer

	mu            sync.Mutex
	notifications []mcp.JSONRPCNotification
}

// connect starts argv (delegateos proxy ... -- server ...) as an MCP server
// over stdio and initializes a session with it. The client is mcp-go's
// default: it probes for protocol 2026-07-28 first and falls back to the
// initialize handshake, which is all these servers speak.
func connect(t *testing.T, argv []string, opts ...client.ClientOption) *session {
	t.Helper()
	stderr := &lockedBuffer{}
	stdio := transport.NewStdioWithOptions(argv[0], nil, argv[1:], transport.WithCommandStderrWriter(stderr))
	w := &wire{BidirectionalInterface: stdio}
	s := &session{Client: client.NewClient(w, opts...), wire: w, stderr: stderr}
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			t.Logf("proxy stderr:\n%s", stderr)
		}
	})
	ctx := testContext(t)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s.OnNotification(func(n mcp.JSONRPCNotification) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.notifications = append(s.notifications, n)
	})
	res, err := s.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "delegateos-examples-test", Version: "0"},
	}})
	if err != nil {
		t.Fatalf("initialize through the proxy: %v", err)
	}
	// The servers' SDK speaks up to 2025-11-25: the handshake must have
	// been negotiated end to end, to the server's newest version.
	if res.ProtocolVersion != mcp.ProtocolVersion20251125 || s.ProtocolVersion() != mcp.ProtocolVersion20251125 {
		t.Fatalf("negotiated protocol %q (client says %q), want %q", res.ProtocolVersion, s.ProtocolVersion(), mcp.ProtocolVersion20251125)
	}
	return s
}

// proxyArgs is delegateos proxy in front of upstream.
func proxyArgs(policy, token string, upstream []string, extra ...string) []string {
	args := []string{delegateos, "proxy", "--policy", policy}
	if token != "" {
		args = append(args, "--token", token)
	}
	args = append(args, extra...)
	return append(append(args, "--"), upstream...)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (s *session) toolNames(t *testing.T) []string {
	t.Helper()
	res, err := s.ListTools(testContext(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func callRequest(name string, args map[string]any) mcp.CallToolRequest {
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	return req
}

// call makes a call the proxy must allow and the tool must carry out.
func (s *session) call(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.CallTool(testContext(t), callRequest(name, args))
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if res.IsError {
		t.Fatalf("%s %v: the tool failed: %s", name, args, text(t, res))
	}
	return res
}

// denial is the data of the proxy's -32001 error (DelegateOS §11.2).
type denial struct {
	Type      string `json:"type"`
	Detail    string `json:"detail"`
	Requested *cap   `json:"requested"`
	Granted   []cap  `json:"granted"`
}

type cap struct {
	Namespace string `json:"namespace"`
	Action    string `json:"action"`
	Resource  string `json:"resource"`
}

func (c cap) String() string { return c.Namespace + ":" + c.Action + ":" + c.Resource }

// deny makes a call the proxy must refuse and returns the refusal.
func (s *session) deny(t *testing.T, name string, args map[string]any) denial {
	t.Helper()
	res, err := s.CallTool(testContext(t), callRequest(name, args))
	if err == nil {
		t.Fatalf("%s %v was allowed: %+v", name, args, res)
	}
	e := s.wire.lastError()
	if e == nil {
		t.Fatalf("%s %v: %v, and no JSON-RPC error on the wire", name, args, err)
	}
	if e.Code != -32001 || e.Message != "DCT verification failed" {
		t.Fatalf("%s %v: error %d %q, want -32001 \"DCT verification failed\"", name, args, e.Code, e.Message)
	}
	var d denial
	b, _ := json.Marshal(e.Data)
	if err := json.Unmarshal(b, &d); err != nil || d.Type == "" {
		t.Fatalf("%s %v: error data %s is not a denial", name, args, b)
	}
	return d
}

// checkDenial compares a denial with what is expected of it.
func checkDenial(t *testing.T, what string, d denial, typ string, requested cap, granted ...cap) {
	t.Helper()
	if d.Type != typ {
		t.Errorf("%s: denial type %q (%s), want %q", what, d.Type, d.Detail, typ)
	}
	if d.Requested == nil || *d.Requested != requested {
		t.Errorf("%s: requested %v, want %v", what, d.Requested, requested)
	}
	if !slices.Equal(d.Granted, granted) {
		t.Errorf("%s: granted %v, want %v", what, d.Granted, granted)
	}
	if d.Detail == "" {
		t.Errorf("%s: the denial has no detail", what)
	}
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// progress returns the notifications/progress received for token.
func (s *session) progress(token any) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, n := range s.notifications {
		if n.Method == string(mcp.MethodNotificationProgress) && n.Params.AdditionalFields["progressToken"] == token {
			out = append(out, n.Params.AdditionalFields)
		}
	}
	return out
}

// decisions are the proxy's "decision" log lines, in order.
func (s *session) decisions(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "decision" {
			out = append(out, line)
		}
	}
	return out
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wire sits between mcp-go's client and its stdio transport and keeps the
// last JSON-RPC error a tools/call got, which the client reduces to its
// message.
type wire struct {
	transport.BidirectionalInterface

	mu       sync.Mutex
	last     *mcp.JSONRPCErrorDetails
	incoming []string
}

func (w *wire) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := w.BidirectionalInterface.SendRequest(ctx, req)
	if req.Method == string(mcp.MethodToolsCall) {
		w.mu.Lock()
		w.last = nil
		if err == nil && resp.Error != nil {
			w.last = resp.Error
		}
		w.mu.Unlock()
	}
	return resp, err
}

func (w *wire) lastError() *mcp.JSONRPCErrorDetails {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// SetRequestHandler records the server-to-client requests that crossed.
func (w *wire) SetRequestHandler(handler transport.RequestHandler) {
	w.BidirectionalInterface.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		w.mu.Lock()
		w.incoming = append(w.incoming, req.Method)
		w.mu.Unlock()
		return handler(ctx, req)
	})
}

func (w *wire) incomingMethods() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.incoming)
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

var _ io.Writer = (*lockedBuffer)(nil)
