//go:build linux

package proxy_test

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	addr, asked, release := heldRelay(t, srv.Addr())
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

// heldRelay listens on a free port and relays each connection to addr,
// holding what clients send until release is called; asked is closed
// when a client first sends something.
func heldRelay(t *testing.T, addr string) (relay string, asked <-chan struct{}, release func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	first, open := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(open) }) })
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			cc, err := l.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", addr)
			if err != nil {
				cc.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, cc, sc)
			mu.Unlock()
			go func() {
				b := make([]byte, 32<<10)
				for {
					n, err := cc.Read(b)
					if n > 0 {
						once.Do(func() { close(first) })
						<-open
						if _, err := sc.Write(b[:n]); err != nil {
							return
						}
					}
					if err != nil {
						sc.Close()
						return
					}
				}
			}()
			go func() { io.Copy(cc, sc); cc.Close() }()
		}
	}()
	return l.Addr().String(), first, func() { releaseOnce.Do(func() { close(open) }) }
}
