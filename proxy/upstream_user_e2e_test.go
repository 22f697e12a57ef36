//go:build linux

package proxy_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// isolationWorld is a tree under the system's temporary directory that
// another user can enter: 0755 directories holding a copy of the
// docserver (0755) and its documents (0644), and a 0755 directory for the
// session token, whose own mode decides who reads it.
type isolationWorld struct {
	dir, docserver, tokenFile string
	token                     string
}

func newIsolationWorld(t *testing.T, e *mcptest.Env, tokenMode os.FileMode) *isolationWorld {
	t.Helper()
	dir, err := os.MkdirTemp("", "delegateos-isolation-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &isolationWorld{dir: dir, docserver: filepath.Join(dir, "docserver"), tokenFile: filepath.Join(dir, "secret", "session.tok")}
	copyFile(t, mcptest.Docserver(t), w.docserver, 0o755)
	docs := filepath.Join(dir, "docs")
	if err := os.CopyFS(docs, os.DirFS(mcptest.FixtureDir(t))); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Chmod(path, 0o755)
		case path != w.docserver:
			return os.Chmod(path, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Docs = docs
	w.token = e.Mint(nil, "docs:read:/**", "mcp:probe:*").String()
	if err := os.WriteFile(w.tokenFile, []byte(w.token+"\n"), tokenMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(w.tokenFile, tokenMode); err != nil {
		t.Fatal(err)
	}
	return w
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// probeResult is the docserver's probe tool's answer.
type probeResult struct {
	UID, GID int
	Groups   []int
	Home     string
	Cwd      string
	PPID     int
	Reads    []struct{ Path, Data, Error string }
}

// probe asks the upstream what it is and what it can read: the proxy's
// environment (where DELEGATEOS_TOKEN is) and the token file.
func (w *isolationWorld) probe(t *testing.T, p *mcptest.Process) probeResult {
	t.Helper()
	s := p.Connect(mcptest.SessionOptions{})
	environ := "/proc/" + strconv.Itoa(p.Cmd.Process.Pid) + "/environ"
	res := s.Call(t, "probe", map[string]any{"paths": []string{environ, w.tokenFile}}).OK(t, "probe")
	var got probeResult
	if err := json.Unmarshal([]byte(mcptest.Text(t, res, 0)), &got); err != nil {
		t.Fatal(err)
	}
	if got.PPID != p.Cmd.Process.Pid || len(got.Reads) != 2 {
		t.Fatalf("the probe did not run under this proxy: %+v", got)
	}
	// The document tools still work: the pipes carry the protocol both ways.
	s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"}).OK(t, "read_file")
	return got
}

// An upstream that runs as the proxy's user can read the session token: in
// the token file, and in the proxy's environment (the initial environment
// stays in /proc/PID/environ after the proxy unsets DELEGATEOS_TOKEN). With
// --upstream-user nobody it can read neither, runs as nobody with nobody's
// groups and home, and still serves the session. The test runs as root,
// as CI does; another user cannot start processes as nobody.
func TestUpstreamUserIsolation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting the upstream as another user needs root; CI runs the tests as root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("this test needs the user nobody: %v", err)
	}
	nobodyUID, _ := strconv.Atoi(nobody.Uid)
	nobodyGID, _ := strconv.Atoi(nobody.Gid)

	t.Run("same user: the upstream reads the token", func(t *testing.T) {
		e := mcptest.NewEnv(t)
		w := newIsolationWorld(t, e, 0o644)
		p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Upstream: []string{w.docserver, "--root", e.Docs, "--diagnostics"},
			Flags: []string{"--token", "@" + w.tokenFile}, Env: []string{"DELEGATEOS_TOKEN=" + w.token}})
		got := w.probe(t, p)
		if got.UID != 0 {
			t.Errorf("the upstream runs as uid %d, want the proxy's (0)", got.UID)
		}
		if !strings.Contains(got.Reads[0].Data, "DELEGATEOS_TOKEN="+w.token) {
			t.Errorf("the same-user upstream could not read the token in the proxy's environment: %+v", got.Reads[0])
		}
		if strings.TrimSpace(got.Reads[1].Data) != w.token {
			t.Errorf("the same-user upstream could not read the token file: %+v", got.Reads[1])
		}
		// A token file others can read is worth a warning.
		p.WaitLog("the token file is readable by group or others (mode 0644): chmod 600 "+w.tokenFile, nil)
	})

	t.Run("--upstream-user nobody: it cannot", func(t *testing.T) {
		e := mcptest.NewEnv(t)
		w := newIsolationWorld(t, e, 0o600)
		p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Upstream: []string{w.docserver, "--root", e.Docs, "--diagnostics"},
			Flags: []string{"--token", "@" + w.tokenFile, "--upstream-user", "nobody"}, Env: []string{"DELEGATEOS_TOKEN=" + w.token}})
		got := w.probe(t, p)
		if got.UID != nobodyUID || got.GID != nobodyGID || len(got.Groups) != 1 || got.Groups[0] != nobodyGID || got.Home != nobody.HomeDir {
			t.Errorf("the upstream runs as %+v, want nobody (uid %d, gid %d, only that group, HOME %s)", got, nobodyUID, nobodyGID, nobody.HomeDir)
		}
		for _, r := range got.Reads {
			if r.Data != "" || !strings.Contains(r.Error, "permission denied") {
				t.Errorf("the upstream running as nobody read %s: %+v", r.Path, r)
			}
		}
		if wd, _ := os.Getwd(); got.Cwd != wd {
			t.Errorf("the upstream's working directory is %q, want the proxy's %q", got.Cwd, wd)
		}
		p.WaitLog("the upstream runs as another user", nil)
	})

	t.Run("--upstream-user refuses a token file the user can read", func(t *testing.T) {
		e := mcptest.NewEnv(t)
		w := newIsolationWorld(t, e, 0o644)
		out, err := exec.Command(mcptest.Delegateos(t), "proxy", "--root", e.Root.ID(), "--token", "@"+w.tokenFile, "--upstream-user", "nobody",
			"--", w.docserver, "--root", e.Docs).CombinedOutput()
		want := "delegateos proxy: --token @" + w.tokenFile + ": the upstream user nobody can read this file (mode 0644), so it could use the session token: make it readable by the proxy's user only (chmod 600 " + w.tokenFile + ")"
		if code := exitCode(err); code != 2 || !strings.HasPrefix(string(out), want) {
			t.Errorf("exit %d:\n%s\nwant exit 2 and\n%s", code, out, want)
		}
	})

	t.Run("an unprivileged proxy says what it needs", func(t *testing.T) {
		e := mcptest.NewEnv(t)
		w := newIsolationWorld(t, e, 0o600)
		bin := filepath.Join(w.dir, "delegateos")
		copyFile(t, mcptest.Delegateos(t), bin, 0o755)
		cmd := exec.Command(bin, "proxy", "--root", e.Root.ID(), "--upstream-user", "65533:65533", "--", w.docserver, "--root", e.Docs)
		cmd.Dir = w.dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(nobodyUID), Gid: uint32(nobodyGID), Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		want := `delegateos proxy: --upstream-user 65533:65533: running the upstream as another user needs root, or the capabilities CAP_SETUID, CAP_SETGID and CAP_KILL; the proxy runs as nobody without CAP_SETUID, CAP_SETGID, CAP_KILL: start it as root`
		if code := exitCode(err); code != 2 || !strings.HasPrefix(string(out), want) {
			t.Errorf("exit %d:\n%s\nwant exit 2 and\n%s", code, out, want)
		}
	})
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// A token written on the proxy's command line is in every user's process
// list: the proxy warns, and names the safe way.
func TestLiteralTokenWarning(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "docs:read:/**")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Flags: []string{"--token", tok.String()}})
	s := p.Connect(mcptest.SessionOptions{})
	s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"}).OK(t, "read_file under the literal token")
	p.WaitLog("the session token was given on the command line, where every local user can read it (ps, /proc/PID/cmdline); give --token @FILE (mode 0600) instead", nil)
}
