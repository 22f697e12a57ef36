// Package examples tests the example configurations in this directory
// against the published MCP servers they are written for:
// @modelcontextprotocol/server-filesystem and
// @modelcontextprotocol/server-everything, pinned in npm/package.json and
// npm/package-lock.json and installed from the npm registry with npm ci.
// Every test runs the real delegateos binary, built by internal/mcptest,
// between mark3labs/mcp-go's client and the real server running under
// Node.js.
//
// The tests need Node.js 20+ and npm; without them they fail, they never
// skip.
package examples

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/internal/mcptest"
)

var (
	// npmDir holds the pinned packages.
	npmDir string
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
	if err := setup(); err != nil {
		fmt.Fprintf(os.Stderr, "examples: %v\n", err)
		os.Exit(1)
	}
	os.Exit(mcptest.Run(m))
}

// setup installs the pinned npm packages if they are not installed at the
// pinned versions already.
func setup() error {
	var err error
	if npmDir, err = filepath.Abs("npm"); err != nil {
		return err
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
	stdout, stderr, code := mcptest.CLI(t, args...)
	if code != want {
		t.Fatalf("delegateos %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, stdout, stderr)
	}
	return stdout
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

// startProxy starts delegateos proxy with policy and token (an @FILE
// argument, or "" for none) in front of upstream, logging to a file of its
// own.
func startProxy(t *testing.T, policy, token string, upstream []string, extra ...string) *mcptest.Process {
	t.Helper()
	flags := []string{"--policy", policy}
	if token != "" {
		flags = append(flags, "--token", token)
	}
	return mcptest.StartProxy(t, mcptest.ProxyOptions{Flags: append(flags, extra...), Upstream: upstream})
}

// session is an MCP client connected to delegateos proxy.
type session struct{ *mcptest.Session }

// connect initializes a session with p. The client is mcp-go's default: it
// probes for protocol 2026-07-28 first and falls back to the initialize
// handshake, which is all these servers speak, up to 2025-11-25: the
// handshake must have been negotiated end to end, to the server's newest
// version.
func connect(t *testing.T, p *mcptest.Process, opts ...client.ClientOption) *session {
	t.Helper()
	return &session{p.Connect(mcptest.SessionOptions{Version: mcp.ProtocolVersion20251125, ClientOptions: opts})}
}

func (s *session) toolNames(t *testing.T) []string {
	t.Helper()
	res, err := s.ListTools(mcptest.Context(t), mcp.ListToolsRequest{})
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

// call makes a call the proxy must allow and the tool must carry out.
func (s *session) call(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	r := s.Call(t, name, args)
	if r.Err != nil {
		t.Fatalf("%s %v: %v", name, args, r.Err)
	}
	if r.Res.IsError {
		t.Fatalf("%s %v: the tool failed: %s", name, args, text(t, r.Res))
	}
	return r.Res
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
	r := s.Call(t, name, args)
	if r.Err == nil {
		t.Fatalf("%s %v was allowed: %+v", name, args, r.Res)
	}
	e := r.RPC
	if e == nil {
		t.Fatalf("%s %v: %v, and no JSON-RPC error on the wire", name, args, r.Err)
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

// revoked reports whether a call of name was refused as revoked; it fails
// the test if the call went through but the tool failed.
func (s *session) revoked(t *testing.T, name string, args map[string]any) bool {
	t.Helper()
	r := s.Call(t, name, args)
	if r.Err == nil {
		if r.Res.IsError {
			t.Fatalf("%s failed: %s", name, text(t, r.Res))
		}
		return false
	}
	return r.RPC != nil && r.RPC.Code == -32001 && strings.Contains(fmt.Sprint(r.RPC.Data), "revoked")
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

func (s *session) sawNotification(method string) bool {
	return len(s.Notifications(method)) > 0
}

// logLines are the proxy's log lines with message msg, in order.
func (s *session) logLines(msg string) []map[string]any {
	return s.Process.LogWith(msg, nil)
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
	binDir := filepath.Dir(mcptest.Delegateos(t))
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

// followREADMEConfig is followREADME for an example whose client
// configuration runs the delegateos on PATH in front of pkg, with the
// policy and the token the README's commands wrote in workdir.
func followREADMEConfig(t *testing.T, example, pkg string, vars map[string]string) (workdir string, pc proxyCommand) {
	t.Helper()
	workdir, cfg := followREADME(t, example, vars)
	pc = parseClientConfig(t, cfg, example, pkg)
	if delegateos := mcptest.Delegateos(t); pc.command != delegateos {
		t.Errorf("command %q, want the delegateos on PATH, %q", pc.command, delegateos)
	}
	if pc.policy != filepath.Join(workdir, "policy.yaml") || pc.token != filepath.Join(workdir, "agent.tok") {
		t.Errorf("--policy %q --token @%q, want both in %s", pc.policy, pc.token, workdir)
	}
	return workdir, pc
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
	if _, err := os.Stat(filepath.Join(mcptest.ModuleRoot(t), pc.policy)); err != nil {
		t.Errorf("the configured policy: %v", err)
	}
	if want := "examples/" + example + "/agent.tok"; pc.token != want {
		t.Errorf("--token @%s, want @%s", pc.token, want)
	}
	return pc
}
