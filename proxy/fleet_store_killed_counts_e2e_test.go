//go:build unix

package proxy_test

import (
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// A proxy writes the counts it saw to its state directory's counts file
// at most once a second, in the background (seenEvery); kill -9 (the OOM
// killer) within that second used to lose the last raises. If Redis loses
// the same last writes (a failover to a replica that had not received
// them, appendfsync everysec and a crash of its machine), another
// machine's calls take the count back up and machine 1's restarted proxy
// (a new nonce, its machine's kept count below the store's) could not
// tell: 40 calls on 30. Each raise is now also stored in the proxy's live
// record, a file mapped into its memory, which the page cache keeps when
// the process is killed; the restarted proxy folds it in. The test holds
// the counts file's lock while machine 1 makes its last 10 calls and is
// killed, to place the kill within the second deterministically; the lock
// is what a second that has not passed yet looks like to the proxy.
func TestE2EFaultKillWithinTheSecondMasksRollback(t *testing.T) {
	f := newStoreFleet(t)
	n, m, snap, lock := f.killedWithinTheSecond(func() (*mcptest.Process, *mcptest.Session) {
		return f.start(f.a, "", func(int) bool { return true }) // killed
	}, func() string { return f.seenFiles()[0] })
	lock.Close()
	f.restore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	k, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
	p3, s3 := f.start(f.a, "", nil)
	more, typ, detail := drain(t, s3, 40)
	total := n + m + k + more
	// The killed proxy's log lost its upstream's last lines: its calls
	// are the client's count.
	f.sameAsUpstreams([]*mcptest.Process{p2, p3}, k+more)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls, was killed within a second of the last %d, Redis lost the same last writes (back to %d), machine 2 made %d: machine 1's restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n+m, m, n, k, more, total, typ, detail)
	}
}
