//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// The state directory's path walk (budget/statedir.go) through the real
// binary, as red team 7 tried it: a loop of symbolic links on the way
// refuses the start naming the directory (not a hang, not a start); a
// directory on the way owned by root (or the user) but writable by its
// group — a group another local user may be in — refuses it naming
// that directory; a relative symbolic link in a sticky directory, owned
// by the user, to a directory only the user can write is followed and
// the proxy serves.
func TestE2EFaultStateDirPathWalk(t *testing.T) {
	f := newStoreFleet(t)
	base := t.TempDir()
	refused := func(dir, want string) {
		t.Helper()
		p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, Env: []string{"DELEGATEOS_STATE_DIR=" + dir}, WantExit: func(code int) bool { return code == 2 }})
		if !p.WaitExit(mcptest.WaitTimeout) {
			t.Fatalf("the proxy started on the state directory %s", dir)
		}
		if e := p.Stderr.String(); !strings.Contains(e, want) {
			t.Errorf("state directory %s: want a refusal naming %q, got: %s", dir, want, e)
		}
	}
	// A loop: l1 → l2 → l1.
	if err := os.Symlink("l2", filepath.Join(base, "l1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("l1", filepath.Join(base, "l2")); err != nil {
		t.Fatal(err)
	}
	refused(filepath.Join(base, "l1", "state"), "symbolic links")
	// A group-writable parent (0770).
	group := filepath.Join(base, "group")
	if err := os.Mkdir(group, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(group, 0o770); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(group, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	refused(filepath.Join(group, "state"), group)
	// A relative link in a sticky directory to a private one: served.
	sticky, real := filepath.Join(base, "sticky"), filepath.Join(base, "real")
	if err := os.Mkdir(sticky, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../real", filepath.Join(sticky, "s")); err != nil {
		t.Fatal(err)
	}
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: []string{"DELEGATEOS_STATE_DIR=" + filepath.Join(sticky, "s", "state")}})
	if n, typ, detail := drain(t, p.Connect(mcptest.SessionOptions{}), 1); n != 1 {
		t.Errorf("state directory through a relative link in a sticky directory: %s: %s; want the call forwarded", typ, detail)
	}
	stopProxy(t, p)
	if _, err := os.Stat(filepath.Join(real, "state", "machine-id")); err != nil {
		t.Errorf("the state directory reached through the link was not used: %v", err)
	}
}
