//go:build linux

package proxy_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// The state directory's path missing below a sticky directory
// (DELEGATEOS_STATE_DIR=/tmp/a/state, /tmp/a not made yet): another user
// makes /tmp/a (0777, theirs) after the proxy checked the path and before
// it makes the directory. The proxy checks the path at start, then talks
// to Redis, then makes the state directory at its first write; the test
// holds the proxy's first request to Redis until it has made the
// component, so the order is the attack's every time. The proxy must
// refuse to start naming that directory, and make nothing in it
// (os.MkdirAll took it for its own: the proxy kept its machine ID and
// counts where the other user can replace them).
func TestE2EFaultStateDirComponentPlantedAfterCheckRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, to make a directory of another user (CI runs as root)")
	}
	srv := redistest.Start(t)
	addr, asked, release := redistest.HeldRelay(t, srv.Addr())
	f := newFleetOn(t, "redis://"+addr+"/0", 30*fleetCost, 30*fleetCost, 30*fleetCost)
	sticky := filepath.Join(t.TempDir(), "sticky")
	if err := os.Mkdir(sticky, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(sticky, "a")
	state := filepath.Join(planted, "state")
	pol := f.policy("")
	pol.RevocationList = "" // the spend store makes the state directory
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a, LogToStderr: true,
		Env: []string{"DELEGATEOS_STATE_DIR=" + state}, WantExit: func(code int) bool { return code == 2 }})
	select {
	case <-asked:
	case <-time.After(mcptest.WaitTimeout):
		t.Fatalf("the proxy sent nothing to Redis; stderr: %s", p.Stderr.String())
	}
	// The proxy checked the path (before it opens its stores); the other
	// user now makes the missing component.
	if err := os.Mkdir(planted, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(planted, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(planted, 54321, 54321); err != nil {
		t.Fatal(err)
	}
	release()
	if !p.WaitExit(mcptest.WaitTimeout) {
		t.Fatalf("the proxy started with its state directory %s made in another user's directory", state)
	}
	if msg := p.Stderr.String(); !strings.Contains(msg, planted+" on its path is owned by the user 54321") {
		t.Errorf("the refusal does not name %s, another user's: %s", planted, msg)
	}
	if _, err := os.Lstat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the proxy made its state directory %s in another user's directory (%v)", state, err)
	}
}
