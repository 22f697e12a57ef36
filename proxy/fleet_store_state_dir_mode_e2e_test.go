//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// An existing DELEGATEOS_STATE_DIR that another local user could write
// (writable by its group or by everyone, or owned by another user) would
// let them delete or replace the machine's ID, counts and revocation
// copies, and so hide a store that lost data: a proxy on a Redis store
// refuses to start, naming the directory and what to run.
func TestE2EFaultUnsafeStateDirRefused(t *testing.T) {
	f := newStoreFleet(t)
	dirMode := func(mode os.FileMode) string {
		d := filepath.Join(t.TempDir(), "state")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return d
	}
	// Another user's directory: one made and given away as root, else
	// the root directory (root's, which this user is not).
	other := "/"
	if os.Getuid() == 0 {
		other = dirMode(0o700)
		if err := os.Chown(other, 54321, 54321); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, dir, want string }{
		{"world-writable", dirMode(0o777), "writable by its group or by other users"},
		{"world-writable, sticky", dirMode(os.ModeSticky | 0o777), "writable by its group or by other users"},
		{"group-writable", dirMode(0o770), "chmod go-w"},
		{"another user's", other, "is owned by the user"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true,
				Env: []string{"DELEGATEOS_STATE_DIR=" + c.dir}, WantExit: func(code int) bool { return code == 2 }})
			if !p.WaitExit(mcptest.WaitTimeout) {
				t.Fatalf("a proxy with the state directory %s (%s) started", c.dir, c.name)
			}
			if msg := p.Stderr.String(); !strings.Contains(msg, c.want) || !strings.Contains(msg, c.dir) {
				t.Errorf("the refusal of the state directory %s (%s) does not say %q: %s", c.dir, c.name, c.want, msg)
			}
		})
	}
	// A directory of this user's that only it can write is used.
	ok := dirMode(0o755)
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: []string{"DELEGATEOS_STATE_DIR=" + ok}})
	if n, typ, detail := drain(t, p.Connect(mcptest.SessionOptions{}), 1); n != 1 {
		t.Errorf("a proxy with the state directory %s (mode 0755, this user's) forwarded no call: %s: %s", ok, typ, detail)
	}
}

// RT6-8: a policy whose ended-delegation set only is in Redis (spend
// store and revocation list local) keeps the machine's durable copy of
// the set (redis-….ended.json) in the state directory all the same; a
// world-writable state directory was used (another user could delete the
// copy, and an ending the set loses is then not written back). It is
// refused at start, as for the spend store.
func TestE2EFaultStateDirOfEndedCopyChecked(t *testing.T) {
	f := newStoreFleet(t)
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	pol := f.e.Policy(mcptest.Priced("echo", fleetCost))
	pol.Extra = "workspace: " + filepath.Join(t.TempDir(), "ws") + "\nended_delegations: " + f.url + "\n"
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a, LogToStderr: true,
		Env: []string{"DELEGATEOS_STATE_DIR=" + dir}, WantExit: func(code int) bool { return code == 2 }})
	if !p.WaitExit(mcptest.WaitTimeout) {
		t.Fatalf("a proxy that keeps its ended-delegation copy in the world-writable state directory %s started; want it refused at start, as for the spend store", dir)
	}
	if msg := p.Stderr.String(); !strings.Contains(msg, "ended-delegation") || !strings.Contains(msg, dir) || !strings.Contains(msg, "chmod go-w") {
		t.Errorf("the refusal of the ended-delegation copy's state directory %s does not name the set, the directory and the remedy: %s", dir, msg)
	}
}
