//go:build linux

package proxy_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team 9 (rtstore9), RT9-3: a lock of the state directory held and
// never let go. The proxies of a machine take the counts file's lock
// (store-….seen.json.lock) around each read, merge and write of it;
// lockWait waited for it without end. A proxy of the machine stopped
// while it held it (SIGSTOP, a frozen container: found by RT9-2's test,
// whose frozen proxy held it) — here the test holds it — left every
// other proxy unable to exit: at its client's end it waited for its
// background counts write, then for its own, for ever (the process
// stayed, holding its Redis connection and live record).
//
// Broke before (the proxy did not exit within 60 s); held: the wait is
// bounded (10 s), the counts write then fails, and the exiting proxy
// keeps its live record (not removed: its counts are not in the counts
// file), which the next proxy started folds: after Redis goes back to an
// older snapshot it refuses store_reset.
func TestE2EFaultLockHeldByAFrozenPeerDoesNotHangTheExit(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	if n, typ, detail := drain(t, s1, 10); n != 10 {
		t.Fatalf("the first 10 calls: %d, then %s: %s", n, typ, detail)
	}
	f.settled()
	state := filepath.Join(f.e.Dir, "state")
	var counts string
	mcptest.Eventually(t, "machine 1's counts kept", func() bool {
		m, _ := filepath.Glob(filepath.Join(state, "*.seen.json"))
		if len(m) != 1 {
			return false
		}
		b, _ := os.ReadFile(m[0])
		counts = m[0]
		return containsMSeen(b, 10)
	})
	snap := f.snapshot()
	lock, err := os.OpenFile(counts+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if n, typ, detail := drain(t, s1, 10); n != 10 {
		t.Fatalf("10 calls while the counts lock is held: %d, then %s: %s", n, typ, detail)
	}
	f.settled()
	p1.Stdin.Close()
	if !p1.WaitExit(mcptest.WaitTimeout) {
		t.Fatalf("the counts file's lock held by another process: the proxy did not exit within %s of its client's end", mcptest.WaitTimeout)
	}
	lock.Close()
	f.restore(snap)
	p3, s3 := f.start(f.a, "", nil)
	more, typ, detail := drain(t, s3, 20)
	f.sameAsUpstreams([]*mcptest.Process{p1, p3}, 20+more)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("the exiting proxy could not write its counts (lock held); Redis went back to 10 of its 20 calls: the next proxy forwarded %d (%d on 30), then %s: %s; want none, store_reset", more, 20+more, typ, detail)
	}
}
