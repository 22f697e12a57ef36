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
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
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
	args := []string{"build", "-o", delegateos}
	if raceEnabled {
		args = append(args, "-race")
		// Without this a race-enabled program sleeps a second as it exits.
		os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	}
	build := exec.Command("go", append(args, "./cmd/delegateos")...)
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
	const need = "these tests run published MCP servers from the npm registry and need Node.js 20+ and npm"
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s: %v", need, err)
		}
	}
	out, err := exec.Command("node", "--version").Output()
	var major int
	if _, scanErr := fmt.Sscanf(string(out), "v%d.", &major); err != nil || scanErr != nil || major < 20 {
		return fmt.Errorf("%s: node --version says %q (%v)", need, bytes.TrimSpace(out), err)
	}

	// npm ci installs exactly the lock file, and the stamp records which
	// lock file the installed tree came from.
	lock, err := os.ReadFile(filepath.Join(npmDir, "package-lock.json"))
	if err != nil {
		return err
	}
	stamp := filepath.Join(npmDir, "node_modules", ".delegateos-lock-sha256")
	sum := fmt.Sprintf("%x\n", sha256.Sum256(lock))
	if b, err := os.ReadFile(stamp); err == nil && string(b) == sum && installed() == nil {
		return nil
	}
	ci := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	ci.Dir = npmDir
	if out, err := ci.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %v\n%s", npmDir, err, out)
	}
	if err := installed(); err != nil {
		return err
	}
	return os.WriteFile(stamp, []byte(sum), 0o644)
}

// installed checks that every server is installed at its pin.
func installed() error {
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
	// logFile is the proxy's --log, if it has one; else it logs to stderr.
	logFile string

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
	if i := slices.Index(argv, "--log"); i > 0 && i < slices.Index(argv, "--") {
		s.logFile = argv[i+1]
	}
	t.Cleanup(func() {
		err := s.Close()
		if strings.Contains(stderr.String(), "DATA RACE") {
			t.Errorf("the race detector found a race in the proxy")
		}
		// mcp-go's Close closes the proxy's stderr before it waits for it to
		// exit, so a proxy logging to stderr dies of SIGPIPE at its next line
		// (see the report); one logging to a file must exit cleanly.
		if s.logFile != "" && !t.Failed() {
			// The client closed the proxy's input: the proxy closed the
			// server's, and the server exited by itself, in time.
			log := s.log()
			if err != nil || !strings.Contains(log, `"msg":"upstream exited after the client closed"`) || strings.Contains(log, "terminating it") {
				t.Errorf("the proxy and the server did not exit cleanly after the client closed (%v):\n%s", err, log)
			}
		}
		if t.Failed() {
			t.Logf("proxy stderr:\n%s\nproxy log:\n%s", stderr, s.log())
		}
	})
	// mcp-go ties the process to the context Start gets: it must outlive
	// the test's contexts so that Close, not a kill, ends the proxy.
	if err := s.Start(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
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

// proxyArgs is delegateos proxy in front of upstream, logging to a file of
// its own.
func proxyArgs(t *testing.T, policy, token string, upstream []string, extra ...string) []string {
	args := []string{delegateos, "proxy", "--policy", policy, "--log", filepath.Join(t.TempDir(), "proxy.log")}
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
	var d denial
	b, _ := json.Marshal(e.Data)
	if err := json.Unmarshal(b, &d); err != nil || d.Type == "" {
		t.Fatalf("%s %v: error data %s is not a denial", name, args, b)
	}
	if want := "DCT verification failed: " + d.Type + " — " + d.Detail; e.Code != -32001 || e.Message != want {
		t.Fatalf("%s %v: error %d %q, want -32001 %q", name, args, e.Code, e.Message, want)
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

func (s *session) sawNotification(method string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.notifications, func(n mcp.JSONRPCNotification) bool { return n.Method == method })
}

// log is what the proxy has logged so far.
func (s *session) log() string {
	if s.logFile == "" {
		return s.stderr.String()
	}
	b, _ := os.ReadFile(s.logFile)
	return string(b)
}

// logLines are the proxy's log lines with message msg, in order.
func (s *session) logLines(msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.log()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == msg {
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
// It can also add params to every tools/call, which mcp.CallToolParams has
// no field for: this is how a call carries its own token in _delegateos.
type wire struct {
	transport.BidirectionalInterface

	mu       sync.Mutex
	last     *mcp.JSONRPCErrorDetails
	incoming []string
	extra    map[string]any
}

func (w *wire) setExtraParams(extra map[string]any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.extra = extra
}

func (w *wire) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	w.mu.Lock()
	extra := w.extra
	w.mu.Unlock()
	if req.Method == string(mcp.MethodToolsCall) && len(extra) > 0 {
		// mcp-go passes params as a struct or a map depending on the
		// protocol era: re-encode them as an object with the extra members.
		b, err := json.Marshal(req.Params)
		if err != nil {
			return nil, err
		}
		var params map[string]any
		if err := json.Unmarshal(b, &params); err != nil {
			return nil, err
		}
		for k, v := range extra {
			params[k] = v
		}
		req.Params = params
	}
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

// readmeBlocks returns the ```sh blocks of an example's README whose label
// (the word after sh in the fence) is label, joined.
func readmeBlocks(t *testing.T, example, label string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(example, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	in := false
	for line := range strings.Lines(string(b)) {
		fence := strings.TrimSpace(line)
		switch {
		case !in && strings.HasPrefix(fence, "```sh"):
			in = strings.TrimSpace(strings.TrimPrefix(fence, "```sh")) == label
		case strings.HasPrefix(fence, "```"):
			in = false
		case in:
			out.WriteString(line)
		}
	}
	if out.Len() == 0 {
		t.Fatalf("%s/README.md has no ```sh %s block", example, label)
	}
	return out.String()
}

// runShell runs script with bash in dir, with the delegateos under test
// first on PATH and HOME set to home, and returns its standard output.
func runShell(t *testing.T, dir, home, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", err, script, &stdout, &stderr)
	}
	return stdout.String()
}

// followREADME runs an example README's set-up commands as a new user
// would, in the example's directory with HOME set to a fresh directory; a
// line setting a variable in vars is given the test's value instead. It
// returns the directory the commands ended in and the client configuration
// they wrote there (client.json).
func followREADME(t *testing.T, example string, vars map[string]string) (workdir string, cfg clientConfig) {
	t.Helper()
	script := readmeBlocks(t, example, "")
	for name, value := range vars {
		var found bool
		var lines []string
		for line := range strings.Lines(script) {
			if strings.HasPrefix(line, name+"=") {
				line, found = name+"="+shellQuote(value)+"\n", true
			}
			lines = append(lines, line)
		}
		if !found {
			t.Fatalf("%s/README.md does not set %s", example, name)
		}
		script = strings.Join(lines, "")
	}
	dir, err := filepath.Abs(example)
	if err != nil {
		t.Fatal(err)
	}
	out := runShell(t, dir, t.TempDir(), script+"\necho \"WORKDIR=$PWD\"\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	workdir, ok := strings.CutPrefix(lines[len(lines)-1], "WORKDIR=")
	if !ok || workdir == dir {
		t.Fatalf("the README's commands did not move to a directory of their own:\n%s", out)
	}
	cfg = readClientConfig(t, filepath.Join(workdir, "client.json"))
	return workdir, cfg
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// clientConfig is the configuration file of a desktop MCP client.
type clientConfig struct {
	MCPServers map[string]struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	} `json:"mcpServers"`
}

func readClientConfig(t *testing.T, path string) clientConfig {
	t.Helper()
	var cfg clientConfig
	if err := readJSON(path, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// proxyCommand is the one server of an example's client configuration,
// checked to be delegateos proxy with a policy and a token file in front of
// the pinned package run by npx.
type proxyCommand struct {
	command       string
	policy, token string   // the --policy and --token @FILE values
	flags         []string // proxy and its flags, up to --
	upstream      []string // what follows --
	upstreamArgs  []string // the server's arguments, after the package
}

func parseClientConfig(t *testing.T, cfg clientConfig, name, pkg string) proxyCommand {
	t.Helper()
	srv, ok := cfg.MCPServers[name]
	if !ok || len(cfg.MCPServers) != 1 {
		t.Fatalf("the client configuration should hold one server, %q: %+v", name, cfg)
	}
	if len(srv.Env) > 0 {
		t.Errorf("the client configuration sets an environment: %v", srv.Env)
	}
	dash := slices.Index(srv.Args, "--")
	if dash < 0 || len(srv.Args) < 1 || srv.Args[0] != "proxy" {
		t.Fatalf("args %q are not proxy [FLAGS] -- UPSTREAM", srv.Args)
	}
	pc := proxyCommand{command: srv.Command, flags: srv.Args[:dash], upstream: srv.Args[dash+1:]}
	for i := 1; i+1 < dash; i += 2 {
		switch srv.Args[i] {
		case "--policy":
			pc.policy = srv.Args[i+1]
		case "--token":
			tok, ok := strings.CutPrefix(srv.Args[i+1], "@")
			if !ok {
				t.Errorf("--token %q: a token belongs in a file (@FILE), not in the configuration", srv.Args[i+1])
			}
			pc.token = tok
		default:
			t.Errorf("unexpected proxy flag %q", srv.Args[i])
		}
	}
	if pc.policy == "" || pc.token == "" {
		t.Fatalf("args %q lack --policy or --token", srv.Args)
	}
	want := []string{"npx", "-y", pkg + "@" + pins[pkg]}
	if len(pc.upstream) < len(want) || !slices.Equal(pc.upstream[:len(want)], want) {
		t.Fatalf("the upstream is %q, want %q followed by the server's arguments (the version npm/package.json pins)", pc.upstream, want)
	}
	pc.upstreamArgs = pc.upstream[len(want):]
	return pc
}

// local is the configured command with the server run from the pinned
// local install instead of npx, which would go to the network.
func (pc proxyCommand) local(pkg string) []string {
	return slices.Concat([]string{pc.command}, pc.flags, []string{"--"}, serverCommand(pkg, pc.upstreamArgs...))
}

// checkExampleFiles checks an example's committed files: the policy passes
// delegateos policy check, and the client configuration runs the proxy
// with that policy, a token file, and the pinned server.
func checkExampleFiles(t *testing.T, example, pkg string, rules int) proxyCommand {
	t.Helper()
	policy := filepath.Join(example, "policy.yaml")
	out := run(t, 0, "policy", "check", "--json", policy)
	var check struct {
		OK    bool
		Tools []json.RawMessage
		Roots []string
	}
	if err := json.Unmarshal([]byte(out), &check); err != nil {
		t.Fatalf("policy check --json: %v\n%s", err, out)
	}
	if !check.OK || len(check.Tools) != rules || len(check.Roots) != 0 {
		t.Errorf("policy check: ok %v, %d rules (want %d), roots %v (want none: the README has people add theirs)\n%s",
			check.OK, len(check.Tools), rules, check.Roots, out)
	}

	pc := parseClientConfig(t, readClientConfig(t, filepath.Join(example, "mcp-client.json")), example, pkg)
	if pc.command != "delegateos" {
		t.Errorf("command %q, want delegateos", pc.command)
	}
	// Paths are relative to the repository root; the README turns them into
	// absolute ones.
	if want := "examples/" + example + "/policy.yaml"; pc.policy != want {
		t.Errorf("--policy %q, want %q", pc.policy, want)
	}
	if _, err := os.Stat(filepath.Join(repo, pc.policy)); err != nil {
		t.Errorf("the configured policy: %v", err)
	}
	if want := "examples/" + example + "/agent.tok"; pc.token != want {
		t.Errorf("--token @%s, want @%s", pc.token, want)
	}
	return pc
}
