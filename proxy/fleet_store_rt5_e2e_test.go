//go:build unix

package proxy_test

// The fifth red team of issue 19's store history: attacks on the fourth
// red team's fixes (per-proxy and per-machine count fields, the machine's
// ID) that failed before a fix made here, or that held. Each says what was
// tried.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// RT5-1 (an attack on the R4-13 fix). R4-13 refuses a start when the
// machine's ID (machine-id) is deleted while a counts file names it; the
// ID overwritten with another valid one (a configuration tool templating
// the state directory, a clone "fixed" by giving it a new ID) passed: the
// counts file's machine counts were dropped as another machine's, so a
// rollback that another machine's calls took back up (R4-2) was missed
// again: 40 calls on 30. Now a start whose machine-id differs from the ID
// a counts file in the directory names is refused, naming both.
func TestE2EFaultMachineIDReplacedRefused(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	if err := os.WriteFile(filepath.Join(f.e.Dir, "state", "machine-id"), []byte("0123456789abcdef01234567\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.restore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	k, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
	p3 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, WantExit: func(code int) bool { return code == 2 }})
	if p3.WaitExit(mcptest.WaitTimeout) {
		if msg := p3.Stderr.String(); !strings.Contains(msg, "machine-id") || !strings.Contains(msg, "0123456789abcdef01234567") {
			t.Errorf("the refusal does not name the replaced machine ID: %s", msg)
		}
		return
	}
	more, typ, detail := drain(t, p3.Connect(mcptest.SessionOptions{}), 40)
	total := n + m + k + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls and stopped, its machine-id was replaced, Redis went back to a snapshot of %d, machine 2 made %d: machine 1's restarted proxy forwarded %d more (%d on 30), then %s: %s; want a refused start or store_reset", n+m, n, k, more, total, typ, detail)
	}
}
