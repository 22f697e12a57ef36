//go:build unix

package proxy_test

import (
	"encoding/json"
	"os"
	"syscall"
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
	p1, s1 := f.start(f.a, "", func(int) bool { return true }) // killed below
	n, _, _ := drain(t, s1, 10)
	f.settled()
	kept := func() int64 {
		b, _ := os.ReadFile(f.seenFiles()[0])
		var st struct {
			MSeen map[string]int64 `json:"mseen"`
		}
		json.Unmarshal(b, &st)
		var top int64
		for _, v := range st.MSeen {
			top = max(top, v)
		}
		return top
	}
	mcptest.Eventually(t, "machine 1's counts kept", func() bool { return kept() == n })
	lock, err := os.OpenFile(f.seenFiles()[0]+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	pid := p1.UpstreamPID()
	if err := p1.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	p1.WaitExit(mcptest.WaitTimeout)
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
