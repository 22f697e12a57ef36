//go:build unix && redteam

package proxy_test

// Attacks of the fifth red team of issue 19's store history that still
// break the product (run with -tags redteam; they fail). See
// /work/wt/rtstore5.report.md.

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// RT5-2. Two machines share a machine ID: machine 2 is a clone of
// machine 1's VM image (its state directory, machine-id included, baked
// into the image). Machine 1 makes 20 calls and stops; Redis goes back to
// a snapshot at 10; machine 2 (the clone) makes 10 calls, which raise the
// key's field m:ID, the shared one, back to 20. Machine 1's restarted
// proxy (a new nonce: no p: field to check) finds its machine's field at
// the 20 it saw and forwards 10 more: 40 on 30.
func TestRedTeamRT5ClonedMachineIDMasksRollback(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	id, err := os.ReadFile(filepath.Join(f.e.Dir, "state", "machine-id"))
	if err != nil {
		t.Fatal(err)
	}
	clone := t.TempDir()
	if err := os.MkdirAll(filepath.Join(clone, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "state", "machine-id"), id, 0o600); err != nil {
		t.Fatal(err)
	}
	f.restore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: clone})
	k, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
	p3, s3 := f.start(f.a, "", nil)
	more, typ, detail := drain(t, s3, 40)
	total := n + m + k + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls and stopped, Redis went back to a snapshot of %d, machine 2 (a clone of machine 1, its machine-id shared) made %d: machine 1's restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n+m, n, k, more, total, typ, detail)
	}
}
