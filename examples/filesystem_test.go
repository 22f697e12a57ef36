package examples

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/delegateos/delegateos/internal/mcptest"
)

const filesystemPkg = "@modelcontextprotocol/server-filesystem"

// The server's tools, by the capability examples/filesystem/policy.yaml
// maps them to.
var (
	fsReadTools  = []string{"directory_tree", "get_file_info", "list_directory", "list_directory_with_sizes", "read_file", "read_media_file", "read_text_file", "search_files"}
	fsWriteTools = []string{"create_directory", "edit_file", "write_file"}
	// Tools that need a grant on every path, or on fs:roots.
	fsWideTools = []string{"list_allowed_directories", "move_file", "read_multiple_files"}
)

// fsFixture is a directory the server is started on: the token grants
// granted/, never secret/, and the server itself may touch both.
type fsFixture struct {
	served, granted string
	root            principal
	policy          string // the example policy, with root trusted
}

func newFSFixture(t *testing.T) *fsFixture {
	t.Helper()
	served, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"granted/a.txt":     "alpha\n",
		"granted/sub/b.txt": "bravo\n",
		"secret/s.txt":      "top secret\n",
	}
	for name, content := range files {
		p := filepath.Join(served, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := &fsFixture{served: served, granted: filepath.Join(served, "granted"), root: keygen(t, t.TempDir(), "root")}
	f.policy = filepath.Join(exampleDir(t, "filesystem", f.root.id), "policy.yaml")
	return f
}

func (f *fsFixture) connect(t *testing.T, token string) *session {
	t.Helper()
	return connect(t, startProxy(t, f.policy, token, serverCommand(filesystemPkg, f.served)))
}

func sorted(lists ...[]string) []string {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return out
}

// TestFilesystemReadOnly: a token granting fs:read on one directory sees the
// read tools only, reads inside the directory, and is refused everything
// else before the server sees it, even what the server itself would allow.
func TestFilesystemReadOnly(t *testing.T) {
	t.Parallel()
	f := newFSFixture(t)
	grant := cap{"fs", "read", f.granted + "/**"}
	s := f.connect(t, mint(t, t.TempDir(), f.root, 1_000_000, grant.String()))

	if got := s.toolNames(t); !slices.Equal(got, fsReadTools) {
		t.Errorf("tools/list = %v\nwant only the read tools %v", got, fsReadTools)
	}

	a := filepath.Join(f.granted, "a.txt")
	if got := text(t, s.call(t, "read_text_file", map[string]any{"path": a})); got != "alpha\n" {
		t.Errorf("read_text_file %s = %q", a, got)
	}
	if got := text(t, s.call(t, "read_file", map[string]any{"path": filepath.Join(f.granted, "sub/b.txt")})); got != "bravo\n" {
		t.Errorf("read_file sub/b.txt = %q", got)
	}
	if got := text(t, s.call(t, "list_directory", map[string]any{"path": f.granted})); got != "[FILE] a.txt\n[DIR] sub" {
		t.Errorf("list_directory %s = %q", f.granted, got)
	}
	if got := text(t, s.call(t, "search_files", map[string]any{"path": f.granted, "pattern": "**/*.txt"})); !strings.Contains(got, "b.txt") || strings.Contains(got, "secret") {
		t.Errorf("search_files = %q", got)
	}

	secret := filepath.Join(f.served, "secret", "s.txt")
	for _, path := range []string{
		secret,
		f.granted + "/../secret/s.txt", // the server resolves it inside its directory
		f.granted + "/./../secret/s.txt",
		f.granted + "/sub/../../secret/s.txt",
		"granted/a.txt", // relative: the server resolves it, the grant cannot match it
		"~/.ssh/id_ed25519",
		f.served,
	} {
		d := s.deny(t, "read_text_file", map[string]any{"path": path})
		checkDenial(t, "read_text_file "+path, d, "capability_not_granted", cap{"fs", "read", path}, grant)
	}
	d := s.deny(t, "list_directory", map[string]any{"path": f.served})
	checkDenial(t, "list_directory of the parent", d, "capability_not_granted", cap{"fs", "read", f.served}, grant)

	// A tool the token does not show is refused by name, before the server
	// runs it: the file is never written.
	newFile := filepath.Join(f.granted, "new.txt")
	d = s.deny(t, "write_file", map[string]any{"path": newFile, "content": "x"})
	checkDenial(t, "write_file", d, "capability_not_granted", cap{"fs", "write", newFile}, grant)
	if _, err := os.Stat(newFile); !os.IsNotExist(err) {
		t.Errorf("the denied write_file reached the server: %v", err)
	}
	d = s.deny(t, "list_allowed_directories", map[string]any{})
	checkDenial(t, "list_allowed_directories", d, "capability_not_granted", cap{"fs", "roots", "*"}, grant)
	d = s.deny(t, "read_multiple_files", map[string]any{"paths": []string{a, secret}})
	checkDenial(t, "read_multiple_files", d, "capability_not_granted", cap{"fs", "read", "*"}, grant)
	// A call with the path missing cannot be mapped, so it is refused.
	d = s.deny(t, "read_text_file", map[string]any{"file": a})
	if d.Type != "capability_not_granted" || !strings.Contains(d.Detail, "path") {
		t.Errorf("read_text_file without path: %+v", d)
	}

	// Each call was logged as one decision.
	var allowed, denied int
	mcptest.Eventually(t, "16 decisions in the proxy's log", func() bool {
		allowed, denied = 0, 0
		for _, l := range s.logLines("decision") {
			if l["allowed"] == true {
				allowed++
			} else {
				denied++
			}
		}
		return allowed+denied >= 16
	})
	if allowed != 4 || denied != 12 {
		t.Errorf("the proxy logged %d allowed and %d denied decisions, want 4 and 12", allowed, denied)
	}
}

// TestFilesystemTraversalReachesServerWithoutTheGate shows what the proxy
// prevents: with a grant on the whole served directory the same traversal
// path is allowed, and the server reads the secret.
func TestFilesystemTraversalReachesServerWithoutTheGate(t *testing.T) {
	t.Parallel()
	f := newFSFixture(t)
	s := f.connect(t, mint(t, t.TempDir(), f.root, 1_000_000, "fs:read:"+f.served+"/**"))
	// Still denied: the glob never matches "..", whatever the grant.
	d := s.deny(t, "read_text_file", map[string]any{"path": f.granted + "/../secret/s.txt"})
	if d.Type != "capability_not_granted" {
		t.Errorf("traversal under a wider grant: %+v", d)
	}
	if got := text(t, s.call(t, "read_text_file", map[string]any{"path": filepath.Join(f.served, "secret/s.txt")})); got != "top secret\n" {
		t.Errorf("read of a granted secret = %q", got)
	}
}

// TestFilesystemWrite: fs:write adds the write tools for the same directory,
// writes land on disk, and writes outside it are refused.
func TestFilesystemWrite(t *testing.T) {
	t.Parallel()
	f := newFSFixture(t)
	read, write := cap{"fs", "read", f.granted + "/**"}, cap{"fs", "write", f.granted + "/**"}
	s := f.connect(t, mint(t, t.TempDir(), f.root, 1_000_000, read.String(), write.String()))

	if got, want := s.toolNames(t), sorted(fsReadTools, fsWriteTools); !slices.Equal(got, want) {
		t.Errorf("tools/list = %v\nwant %v", got, want)
	}
	newFile := filepath.Join(f.granted, "notes", "new.txt")
	s.call(t, "create_directory", map[string]any{"path": filepath.Dir(newFile)})
	s.call(t, "write_file", map[string]any{"path": newFile, "content": "one\ntwo\n"})
	s.call(t, "edit_file", map[string]any{"path": newFile, "edits": []map[string]any{{"oldText": "two", "newText": "three"}}})
	if b, err := os.ReadFile(newFile); err != nil || string(b) != "one\nthree\n" {
		t.Errorf("%s holds %q, %v", newFile, b, err)
	}

	for _, path := range []string{
		filepath.Join(f.served, "secret", "s.txt"),
		f.granted + "/../secret/s.txt",
		f.granted + "/../escaped.txt",
	} {
		d := s.deny(t, "write_file", map[string]any{"path": path, "content": "overwritten"})
		checkDenial(t, "write_file "+path, d, "capability_not_granted", cap{"fs", "write", path}, read, write)
	}
	if b, _ := os.ReadFile(filepath.Join(f.served, "secret", "s.txt")); string(b) != "top secret\n" {
		t.Errorf("the secret was overwritten: %q", b)
	}
	if _, err := os.Stat(filepath.Join(f.served, "escaped.txt")); !os.IsNotExist(err) {
		t.Errorf("a denied write reached the server: %v", err)
	}
	// move_file writes two paths; only a grant on every path may use it.
	d := s.deny(t, "move_file", map[string]any{"source": filepath.Join(f.served, "secret", "s.txt"), "destination": newFile})
	checkDenial(t, "move_file", d, "capability_not_granted", cap{"fs", "write", "*"}, read, write)
}

// TestFilesystemWholeGrant: a token granting fs:*:* sees every tool,
// including the ones that need a grant on every path.
func TestFilesystemWholeGrant(t *testing.T) {
	t.Parallel()
	f := newFSFixture(t)
	s := f.connect(t, mint(t, t.TempDir(), f.root, 1_000_000, "fs:*:*"))
	if got, want := s.toolNames(t), sorted(fsReadTools, fsWriteTools, fsWideTools); !slices.Equal(got, want) {
		t.Errorf("tools/list = %v\nwant %v", got, want)
	}
	if got := text(t, s.call(t, "list_allowed_directories", map[string]any{})); !strings.Contains(got, f.served) {
		t.Errorf("list_allowed_directories = %q", got)
	}
	got := text(t, s.call(t, "read_multiple_files", map[string]any{"paths": []string{filepath.Join(f.granted, "a.txt"), filepath.Join(f.served, "secret/s.txt")}}))
	if !strings.Contains(got, "alpha") || !strings.Contains(got, "top secret") {
		t.Errorf("read_multiple_files = %q", got)
	}
	s.call(t, "move_file", map[string]any{"source": filepath.Join(f.granted, "a.txt"), "destination": filepath.Join(f.served, "a.txt")})
	if _, err := os.Stat(filepath.Join(f.served, "a.txt")); err != nil {
		t.Errorf("move_file did not move: %v", err)
	}
}

// TestFilesystemPerCallToken: with no session token, a call without a DCT
// is refused, one carrying its own in params._delegateos (§11.1) is gated
// by it, and tools/list shows the view of the last token a call was allowed
// with.
func TestFilesystemPerCallToken(t *testing.T) {
	t.Parallel()
	f := newFSFixture(t)
	tmp := t.TempDir()
	tokenOf := func(arg string) string {
		b, err := os.ReadFile(strings.TrimPrefix(arg, "@"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	grant := cap{"fs", "read", f.granted + "/**"}
	granted := tokenOf(mint(t, tmp, f.root, 1_000_000, grant.String()))
	other := cap{"fs", "read", f.served + "/secret/**"}
	otherTok := tokenOf(mint(t, tmp, f.root, 1_000_000, other.String()))
	s := f.connect(t, "")

	if got := s.toolNames(t); len(got) != 0 {
		t.Errorf("tools/list without any token = %v, want nothing", got)
	}
	a := filepath.Join(f.granted, "a.txt")
	d := s.deny(t, "read_text_file", map[string]any{"path": a})
	checkDenial(t, "a call without a token", d, "malformed_token", cap{"fs", "read", a})

	s.SetExtraParams(map[string]any{"_delegateos": map[string]any{"dct": granted, "format": "delegateos-sjt-v1", "contractId": "ct_examples"}})
	if got := text(t, s.call(t, "read_text_file", map[string]any{"path": a})); got != "alpha\n" {
		t.Errorf("read_text_file with _delegateos = %q", got)
	}
	if got := s.toolNames(t); !slices.Equal(got, fsReadTools) {
		t.Errorf("tools/list after a call with a read token = %v", got)
	}
	secret := filepath.Join(f.served, "secret", "s.txt")
	d = s.deny(t, "read_text_file", map[string]any{"path": secret})
	checkDenial(t, "the secret with the granted directory's token", d, "capability_not_granted", cap{"fs", "read", secret}, grant)

	s.SetExtraParams(map[string]any{"_delegateos": map[string]any{"dct": otherTok}})
	if got := text(t, s.call(t, "read_text_file", map[string]any{"path": secret})); got != "top secret\n" {
		t.Errorf("read_text_file with the other token = %q", got)
	}
	d = s.deny(t, "read_text_file", map[string]any{"path": a})
	checkDenial(t, "the granted file with the other token", d, "capability_not_granted", cap{"fs", "read", a}, other)

	s.SetExtraParams(map[string]any{"_delegateos": map[string]any{"dct": granted, "contractId": "ct_another"}})
	d = s.deny(t, "read_text_file", map[string]any{"path": a})
	checkDenial(t, "a call naming another contract", d, "capability_not_granted", cap{"fs", "read", a}, grant)
}

// TestFilesystemExpiry: a session token that expires while the proxy runs
// is refused from then on.
func TestFilesystemExpiry(t *testing.T) {
	t.Parallel()
	f := newFSFixture(t)
	dir := t.TempDir()
	agent := keygen(t, dir, "agent")
	tok := filepath.Join(dir, "agent.tok")
	// Long enough for the proxy and the server to start on a slow machine.
	expires := time.Now().Add(4 * time.Second).UTC().Truncate(time.Second)
	out := run(t, 0, "dct", "mint", "--key", f.root.key, "--to", agent.id, "--cap", "fs:read:"+f.granted+"/**",
		"--contract", "ct_examples", "--budget", "1000", "--expires", expires.Format(time.RFC3339), "--max-depth", "0")
	if err := os.WriteFile(tok, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	s := f.connect(t, "@"+tok)
	a := filepath.Join(f.granted, "a.txt")
	s.call(t, "read_text_file", map[string]any{"path": a})
	time.Sleep(time.Until(expires) + 100*time.Millisecond)
	d := s.deny(t, "read_text_file", map[string]any{"path": a})
	if d.Type != "expired" {
		t.Errorf("a call after the token expired: %+v", d)
	}
}

// TestFilesystemClientRoots: a client that offers roots replaces the
// server's directories with them (the server asks with roots/list, which
// crosses the proxy); the token still decides what the agent reaches.
func TestFilesystemClientRoots(t *testing.T) {
	t.Parallel()
	f := newFSFixture(t)
	grant := cap{"fs", "read", f.granted + "/**"}
	roots := mcptest.Roots{{URI: "file://" + f.served, Name: filepath.Base(f.served)}}
	// Started on granted/ alone; the client's root widens it to all of served/.
	s := connect(t, startProxy(t, f.policy, mint(t, t.TempDir(), f.root, 1_000_000, grant.String(), "fs:roots:*"),
		serverCommand(filesystemPkg, f.granted)), client.WithRootsHandler(roots))
	mcptest.Eventually(t, "roots/list from the server", func() bool { return slices.Contains(s.Wire.IncomingMethods(), "roots/list") })
	mcptest.Eventually(t, "the server to take the client's root", func() bool {
		return strings.Contains(text(t, s.call(t, "list_allowed_directories", map[string]any{})), f.served)
	})
	secret := filepath.Join(f.served, "secret", "s.txt")
	d := s.deny(t, "read_text_file", map[string]any{"path": secret})
	checkDenial(t, "the secret under the client's root", d, "capability_not_granted", cap{"fs", "read", secret}, grant, cap{"fs", "roots", "*"})
	if got := text(t, s.call(t, "read_text_file", map[string]any{"path": filepath.Join(f.granted, "a.txt")})); got != "alpha\n" {
		t.Errorf("read_text_file = %q", got)
	}
}

// TestFilesystemLimitSymlinks pins down a limit the README states: the
// proxy checks the path the agent sends, and the server follows a link
// under a granted directory to another of its directories.
func TestFilesystemLimitSymlinks(t *testing.T) {
	t.Parallel()
	f := newFSFixture(t)
	link := filepath.Join(f.granted, "link.txt")
	if err := os.Symlink(filepath.Join(f.served, "secret", "s.txt"), link); err != nil {
		t.Fatal(err)
	}
	s := f.connect(t, mint(t, t.TempDir(), f.root, 1_000_000, "fs:read:"+f.granted+"/**"))
	if got := text(t, s.call(t, "read_text_file", map[string]any{"path": link})); got != "top secret\n" {
		t.Errorf("read through a link = %q; if this is refused now, update the README's limits", got)
	}
}

// TestFilesystemExampleFiles: the committed policy passes policy check and
// the client configuration runs the proxy with it in front of the pinned
// server.
func TestFilesystemExampleFiles(t *testing.T) {
	t.Parallel()
	pc := checkExampleFiles(t, "filesystem", filesystemPkg, 6)
	if !slices.Equal(pc.upstreamArgs, []string{"/path/to/project"}) {
		t.Errorf("the server's arguments are %q, want the one directory the README replaces", pc.upstreamArgs)
	}
}

// TestFilesystemREADME follows the README as a new user would: its
// commands set up the keys, the policy, the token and the client
// configuration; then the configured command (with the pinned local
// install instead of npx) serves an MCP client, and the README's revocation
// cuts it off while it runs.
func TestFilesystemREADME(t *testing.T) {
	t.Parallel()
	f := newFSFixture(t)
	workdir, pc := followREADMEConfig(t, "filesystem", filesystemPkg, map[string]string{"PROJECT": f.granted})
	if !slices.Equal(pc.upstreamArgs, []string{f.granted}) {
		t.Errorf("the server's arguments are %q, want [%s]", pc.upstreamArgs, f.granted)
	}

	s := connect(t, mcptest.Start(t, pc.local(filesystemPkg), mcptest.StartOptions{}))
	if got, want := s.toolNames(t), sorted(fsReadTools, []string{"list_allowed_directories"}); !slices.Equal(got, want) {
		t.Errorf("tools/list = %v\nwant %v", got, want)
	}
	if got := text(t, s.call(t, "list_allowed_directories", map[string]any{})); !strings.Contains(got, f.granted) {
		t.Errorf("list_allowed_directories = %q", got)
	}
	a := filepath.Join(f.granted, "a.txt")
	if got := text(t, s.call(t, "read_text_file", map[string]any{"path": a})); got != "alpha\n" {
		t.Errorf("read_text_file = %q", got)
	}
	up := f.granted + "/../secret/s.txt"
	d := s.deny(t, "read_text_file", map[string]any{"path": up})
	checkDenial(t, "the README's traversal", d, "capability_not_granted", cap{"fs", "read", up},
		cap{"fs", "read", f.granted + "/**"}, cap{"fs", "roots", "*"})

	runShell(t, workdir, t.TempDir(), readmeBlocks(t, "filesystem", "revoke"))
	mcptest.Eventually(t, "the revocation to reach the running proxy", func() bool {
		return s.revoked(t, "read_text_file", map[string]any{"path": a})
	})
}
