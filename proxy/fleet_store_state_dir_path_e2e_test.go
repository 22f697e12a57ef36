//go:build unix

package proxy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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

// wantStateDirRefused starts a proxy with the state directory dir and
// wants it refused at start (exit 2), its message naming want.
func (f *fleet) wantStateDirRefused(t *testing.T, dir, why string, want ...string) {
	t.Helper()
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true,
		Env: []string{"DELEGATEOS_STATE_DIR=" + dir}, WantExit: func(code int) bool { return code == 2 }})
	if !p.WaitExit(mcptest.WaitTimeout) {
		t.Fatalf("a proxy with the state directory %s (%s: another user can replace it) started; want it refused at start", dir, why)
	}
	for _, w := range want {
		if msg := p.Stderr.String(); !strings.Contains(msg, w) {
			t.Errorf("the refusal of the state directory %s (%s) does not say %q: %s", dir, why, w, msg)
		}
	}
}

// RT6-6: CheckStateDir looked at the state directory itself only. A
// state directory of the proxy's user, 0700, in a parent another user
// can write (a shared /srv/delegateos made 0777 for several services, no
// sticky bit), or reached through another user's symbolic link in a
// sticky directory (followed when fs.protected_symlinks is 0), was
// accepted; yet that user can rename the directory away or re-point the
// link, and the next proxy makes a fresh one: a new machine, which does
// not see a store gone back to an older snapshot (the next test). Every
// directory and link on the way is checked now (sshd's StrictModes).
// Needs root, to act as another user (CI runs as root).
func TestE2EFaultStateDirParentWritableByOthers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, to act as another user (CI runs as root)")
	}
	f := newStoreFleet(t)
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	inShared := filepath.Join(shared, "state")
	if err := os.Mkdir(inShared, 0o700); err != nil {
		t.Fatal(err)
	}
	f.wantStateDirRefused(t, inShared, "in a parent writable by everyone", shared+" on its path is writable by its group or by other users and not sticky", "chmod go-w "+shared)
	// Another user's symbolic link in a sticky directory everyone can
	// write, to a state directory of this user's.
	tmp := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "state")
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	f.wantStateDirRefused(t, link, "another user's symbolic link", "the symbolic link "+link+" on its path is owned by the user 54321")
	// A directory of another user's on the way.
	theirs := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(theirs, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	f.wantStateDirRefused(t, filepath.Join(theirs, "state"), "in another user's directory", "the directory "+theirs+" on its path is owned by the user 54321")
	// The same, sticky and safe: used.
	if err := os.Lchown(link, 0, 0); err != nil {
		t.Fatal(err)
	}
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: []string{"DELEGATEOS_STATE_DIR=" + link}})
	if n, typ, detail := drain(t, p.Connect(mcptest.SessionOptions{}), 1); n != 1 {
		t.Errorf("a proxy with the state directory %s (this user's link in a sticky directory, to a directory of this user's) forwarded no call: %s: %s", link, typ, detail)
	}
}

// RT6-7: the consequence. Machine 1 makes 20 calls and stops; Redis goes
// back to a snapshot at 10; its state directory's parent is (now) one
// everyone can write, and another local user renames the state directory
// away (mv, as that user: the directory's own mode does not matter).
// Machine 1's restarted proxy made a fresh state directory, a new
// machine that never saw the store, and forwarded 20 more: 40 on 30. Now
// it refuses to start, naming the parent.
func TestE2EFaultStateDirRenamedAwayByAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, to act as another user (CI runs as root)")
	}
	f := newStoreFleet(t)
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
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
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	mv := exec.Command("mv", state, filepath.Join(shared, "gone"))
	mv.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	if out, err := mv.CombinedOutput(); err != nil {
		t.Fatalf("another user's mv of the state directory: %v %s", err, out)
	}
	f.restore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: env, LogToStderr: true,
		WantExit: func(code int) bool { return code == 2 }})
	if !p2.WaitExit(mcptest.WaitTimeout) {
		more, typ, detail := drain(t, p2.Connect(mcptest.SessionOptions{}), 40)
		f.sameAsUpstreams([]*mcptest.Process{p1, p2}, n+m+more)
		t.Fatalf("machine 1 made %d calls and stopped, Redis went back to %d, another user renamed its state directory away (its parent %s is 0777): machine 1's restarted proxy started and forwarded %d more (%d on 30), then %s: %s; want it refused at start", n+m, n, shared, more, n+m+more, typ, strings.TrimSpace(detail))
	}
	f.sameAsUpstreams([]*mcptest.Process{p1}, n+m)
	if msg := p2.Stderr.String(); !strings.Contains(msg, shared+" on its path is writable") {
		t.Errorf("the restarted proxy's refusal does not name the parent %s: %s", shared, msg)
	}
}
