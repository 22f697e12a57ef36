//go:build unix

package proxy_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// A machine's ID (machine-id in its state directory) used by two hosts:
// each reservation records which instance of the machine made it (the
// host's boot and the state directory's device and inode, field i:ID), and
// a proxy whose machine has a count to check at a key whose field names
// an instance its state directory never ran as refuses the tree's calls
// (store_reset, saying the ID is shared and what to run); a new instance
// of the same directory (a reboot, the directory moved) takes its field
// over.

// Two machines share a machine ID: machine 2 is a clone of
// machine 1's VM image (its state directory, machine-id included, baked
// into the image). Machine 1 makes 20 calls and stops; Redis goes back to
// a snapshot at 10; machine 2 (the clone) makes 10 calls, which raise the
// key's field m:ID, the shared one, back to 20. Machine 1's restarted
// proxy (a new nonce: no p: field to check) finds its machine's field at
// the 20 it saw and forwards 10 more: 40 on 30.
func TestE2EFaultClonedMachineIDMasksRollback(t *testing.T) {
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
	if more != 0 || typ != string(gate.StoreReset) || !strings.Contains(detail, "used by another host too") {
		t.Errorf("machine 1 made %d calls and stopped, Redis went back to a snapshot of %d, machine 2 (a clone of machine 1, its machine-id shared) made %d: machine 1's restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset naming the machine ID shared", n+m, n, k, more, total, typ, detail)
	}
}

// The whole state directory copied (counts, instances and all), as a VM
// image taken after machine 1 had made 10 calls: machine 1 makes 10 more
// and stops, Redis goes back to a snapshot at 10, the copy takes the
// machine's field over (its directory ran as machine 1's instance) and
// makes 10 calls, raising the count back to 20. Machine 1's restarted
// proxy finds its machine's field raised by an instance its directory
// never ran as and refuses.
func TestE2EFaultClonedStateDirectoryRefused(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	snap := f.snapshot()
	clone := t.TempDir()
	copyStateDir(t, filepath.Join(f.e.Dir, "state"), filepath.Join(clone, "state"))
	p2, s2 := f.start(f.a, "", nil)
	m, _, _ := drain(t, s2, 10)
	f.settled()
	stopProxy(t, p2)
	f.restore(snap)
	p3 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: clone})
	k, _, _ := drain(t, p3.Connect(mcptest.SessionOptions{}), 10)
	p4, s4 := f.start(f.a, "", nil)
	more, typ, detail := drain(t, s4, 40)
	total := n + m + k + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3, p4}, total)
	if more != 0 || typ != string(gate.StoreReset) || !strings.Contains(detail, "used by another host too") {
		t.Errorf("machine 1 made %d calls and stopped, its state directory copied to machine 2 after %d, Redis went back to that point, machine 2 made %d: machine 1's restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset naming the machine ID shared", n+m, n, k, more, total, typ, detail)
	}
}

// The copy of the whole state directory (its list of instances with it)
// calls first and takes the machine's field over, as a reboot would; then
// Redis goes back to a snapshot from before the copy's calls, and the
// original, which the snapshot names as the field's last writer, takes
// the count back up with 10 calls. The copy's restarted proxy finds the
// field raised by the original's instance, one its directory ran as, but
// before the copy's own instance raised it: only another host still
// running as it does that, and the copy refuses (else 40 on 30).
func TestE2EFaultClonedStateDirectoryOriginalWritesAgainRefused(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	clone := t.TempDir()
	copyStateDir(t, filepath.Join(f.e.Dir, "state"), filepath.Join(clone, "state"))
	snap := f.snapshot()
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: clone})
	k, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
	f.settled()
	stopProxy(t, p2)
	f.restore(snap)
	p3, s3 := f.start(f.a, "", nil)
	m, _, _ := drain(t, s3, 10)
	f.settled()
	p4 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: clone})
	more, typ, detail := drain(t, p4.Connect(mcptest.SessionOptions{}), 40)
	total := n + k + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3, p4}, total)
	if more != 0 || typ != string(gate.StoreReset) || !strings.Contains(detail, "used by another host too") {
		t.Errorf("machine 1 made %d calls, its state directory copied to machine 2, which made %d; Redis went back to before them, machine 1 made %d: machine 2's restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset naming the machine ID shared", n, k, m, more, total, typ, detail)
	}
}

// A reboot of the machine (here: its state directory moved to another
// inode, which is a new instance as a new boot is) takes over the field
// its previous instance raised: its calls go on, to the budget.
func TestE2EFaultMachineNewInstanceTakesOverItsField(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 20)
	f.settled()
	stopProxy(t, p1)
	moved := t.TempDir()
	copyStateDir(t, filepath.Join(f.e.Dir, "state"), filepath.Join(moved, "state"))
	if err := os.RemoveAll(filepath.Join(f.e.Dir, "state")); err != nil {
		t.Fatal(err)
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: moved})
	more, typ, detail := drain(t, p2.Connect(mcptest.SessionOptions{}), 40)
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, n+more)
	if n+more != 30 || typ != string(dct.BudgetExceeded) {
		t.Errorf("machine 1 made %d calls, its state directory moved (a new instance of the machine): %d more, then %s: %s; want 10, then budget_exceeded", n, more, typ, detail)
	}
}

// copyStateDir copies the files of the state directory from to to, as a
// disk image or a backup does.
func copyStateDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	es, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if !e.Type().IsRegular() {
			continue
		}
		r, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(filepath.Join(to, e.Name()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, err = io.Copy(w, r)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}
