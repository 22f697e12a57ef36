//go:build linux

package upstreamuser

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestResolveUpstreamUser(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("this test needs the user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	if uid == os.Geteuid() {
		t.Fatal("this test must not run as nobody")
	}
	for _, spec := range []string{"nobody", nobody.Uid, "nobody:" + nobody.Gid} {
		u, err := Resolve(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if u.name != "nobody" || int(u.uid) != uid || int(u.gid) != gid || u.home != nobody.HomeDir || !slices.Contains(u.groups, uint32(gid)) {
			t.Errorf("%s: %+v", spec, u)
		}
	}
	// A uid with no entry takes the group given; its home is /.
	u, err := Resolve("4000000000:4000000001")
	if err != nil || u.uid != 4000000000 || u.gid != 4000000001 || u.home != "/" || len(u.groups) != 0 || u.name != "4000000000" {
		t.Errorf("4000000000:4000000001: %+v, %v", u, err)
	}
	self := strconv.Itoa(os.Geteuid())
	for spec, want := range map[string]string{
		"root":                 `"root" is root`,
		"0":                    `"0" is root`,
		"0:" + nobody.Gid:      `is root`,
		self + ":" + self:      "the proxy's own user",
		"":                     "is not USER[:GROUP]",
		":x":                   "is not USER[:GROUP]",
		"nobody:":              "is not USER[:GROUP]",
		"no body":              "is not USER[:GROUP]",
		"4000000000":           "has no entry in the user database, so it has no group",
		"no-such-user-here":    `there is no user "no-such-user-here"`,
		"nobody:no-such-group": `there is no group "no-such-group"`,
	} {
		if self == "0" && spec == self+":"+self {
			continue // root is refused as root
		}
		if _, err := Resolve(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
	}
}

func TestUpstreamUserPrepare(t *testing.T) {
	u := &User{name: "svc", uid: 4000000000, gid: 4000000001, groups: []uint32{4000000001, 7}, home: "/srv/svc"}
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Env = []string{"PATH=/bin", "HOME=/root", "USER=root", "LOGNAME=root", "SSH_AUTH_SOCK=/tmp/agent", "XDG_RUNTIME_DIR=/run/user/0", "API_KEY=k"}
	if err := u.Prepare(cmd); err != nil {
		t.Fatal(err)
	}
	if cmd.SysProcAttr.Pdeathsig != syscall.SIGTERM {
		t.Error("prepare dropped the parent-death signal")
	}
	c := cmd.SysProcAttr.Credential
	if c == nil || c.Uid != u.uid || c.Gid != u.gid || !slices.Equal(c.Groups, u.groups) || c.NoSetGroups {
		t.Errorf("credential %+v", c)
	}
	want := []string{"PATH=/bin", "API_KEY=k", "HOME=/srv/svc", "USER=svc", "LOGNAME=svc"}
	if !slices.Equal(cmd.Env, want) {
		t.Errorf("environment %q, want %q", cmd.Env, want)
	}
	// Without groups, the proxy's supplementary groups are cleared, not kept.
	cmd = exec.Command("true")
	if err := (&User{uid: 1, gid: 1}).Prepare(cmd); err != nil {
		t.Fatal(err)
	}
	if c := cmd.SysProcAttr.Credential; c.Groups == nil || len(c.Groups) != 0 || c.NoSetGroups {
		t.Errorf("no groups: %+v", c)
	}
	if len(cmd.Env) == 0 {
		t.Error("an unset environment was not taken from the proxy's")
	}
}

// mayAccess reads the mode bits of the file and of every directory above
// it, as the kernel does for a user that is not root.
func TestUpstreamUserMayAccess(t *testing.T) {
	me := uint32(os.Geteuid())
	base, err := os.MkdirTemp("", "delegateos-mayaccess-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	// Every directory above must be searchable by others for the "other"
	// cases to mean anything.
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Fatalf("%s is not searchable by others; run the test with a TMPDIR that is", d)
		}
	}
	other := &User{uid: 4000000000, gid: 4000000000}
	owner := &User{uid: me, gid: 4000000000}
	st, _ := os.Stat(file)
	group := &User{uid: 4000000000, gid: 4000000000, groups: []uint32{st.Sys().(*syscall.Stat_t).Gid}}
	for _, c := range []struct {
		mode    os.FileMode
		dirMode os.FileMode
		u       *User
		want    uint32
		ok      bool
	}{
		{0o600, 0o755, other, 4, false},
		{0o600, 0o755, owner, 4, true},
		{0o600, 0o755, owner, 1, false},
		{0o644, 0o755, other, 4, true},
		{0o644, 0o755, other, 2, false},
		{0o640, 0o755, group, 4, true},
		{0o604, 0o755, group, 4, false}, // the group bits apply, not the other bits
		{0o644, 0o750, other, 4, false}, // the directory stops it
		{0o644, 0o754, other, 4, false}, // read but not search
		{0o646, 0o755, other, 6, true},
	} {
		if err := os.Chmod(file, c.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, c.dirMode); err != nil {
			t.Fatal(err)
		}
		if got := c.u.MayAccess(file, c.want); got != c.ok {
			t.Errorf("file %04o in dir %04o, uid %d gid %d groups %v, want %o: %v", c.mode, c.dirMode, c.u.uid, c.u.gid, c.u.groups, c.want, got)
		}
	}
	if other.MayAccess(filepath.Join(dir, "missing"), 4) {
		t.Error("a missing file is accessible")
	}
}
