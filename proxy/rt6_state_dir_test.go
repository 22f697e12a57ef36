//go:build unix && redteam

package proxy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// otherUID is a user that is not the test's (the tests run as root to
// act as it).
const otherUID = 54321

// openPath makes dir and its parents up to the test's temporary root
// traversable by every user (t.TempDir makes them 0700), so that another
// user can reach what the test lays out there.
func openPath(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o005 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// RT6: CheckStateDir looks at the state directory itself only. A state
// directory of the proxy's user, 0700, in a parent another user can
// write (a shared /srv/delegateos made 0777 for several services, no
// sticky bit) is accepted; yet that user can rename the directory away
// (or, with fs.protected_symlinks off, own a symlink on the path in a
// sticky /tmp and re-point it), and the next proxy makes a fresh one: a new machine, which does
// not see a store gone back to an older snapshot (the next test). Fix:
// check every component of the path, as sshd's StrictModes does: each
// directory from the state directory up to / is not writable by group or
// others (unless sticky and, for the last one, owned by the user), and
// owned by the user or root; a symlink on the way (Lstat) is owned by
// the user or root; then open the directory and keep using it by its
// descriptor (or compare its device and inode at each use).
func TestRedTeamRT6StateDirParentWritableByOthers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, to act as another user")
	}
	f := newStoreFleet(t)
	// A parent everyone can write, not sticky.
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777)
	inShared := filepath.Join(shared, "state")
	if err := os.Mkdir(inShared, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, dir string }{
		{"in a parent writable by everyone", inShared},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true,
				Env: []string{"DELEGATEOS_STATE_DIR=" + c.dir}, WantExit: func(int) bool { return true }})
			s := p.Connect(mcptest.SessionOptions{})
			if n, _, _ := drain(t, s, 1); n == 1 {
				t.Errorf("a proxy with the state directory %s (%s: another user can replace it) started and forwarded a call; want it refused at start", c.dir, c.name)
			}
		})
	}
}

// RT6: the consequence. Machine 1's state directory is its user's and
// 0700, in a parent everyone can write. Machine 1 makes 20 calls and
// stops; Redis goes back to a snapshot at 10. Another local user renames
// the state directory away (mv, as that user: the parent is writable,
// the directory's own mode does not matter) — they cannot read it, and
// need not. Machine 1's restarted proxy makes a fresh state directory:
// a new machine that never saw the store, and forwards 20 more: 40 on
// 30. The refusal of 854d2d1 ("another local user could delete or
// replace what this machine keeps there") does not see it.
func TestRedTeamRT6StateDirRenamedAwayByAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, to act as another user")
	}
	f := newStoreFleet(t)
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777)
	openPath(t, shared)
	state := filepath.Join(shared, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"DELEGATEOS_STATE_DIR=" + state}
	p1 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: env})
	s1 := p1.Connect(mcptest.SessionOptions{})
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	mv := exec.Command("mv", state, filepath.Join(shared, "gone"))
	mv.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	if out, err := mv.CombinedOutput(); err != nil {
		t.Fatalf("another user's mv of the state directory: %v %s", err, out)
	}
	f.restore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: env})
	more, typ, detail := drain(t, p2.Connect(mcptest.SessionOptions{}), 40)
	total := n + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls and stopped, Redis went back to %d, another user renamed its state directory away (its parent %s is 0777): machine 1's restarted proxy forwarded %d more (%d on 30), then %s: %s; want none (refused at start, or store_reset)", n+m, n, shared, more, total, typ, strings.TrimSpace(detail))
	}
}
