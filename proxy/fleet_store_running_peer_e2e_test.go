//go:build unix

package proxy_test

import (
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// What a machine saw reaches the proxies already running on it, not
// only those it starts later (red team 6, RT6-10). Two proxies run on machine 1 (one state directory): proxy 2
// makes 1 call, proxy 1 makes 19 more and stops (cleanly: its counts are
// in the counts file; killed, they would be in its live record — the
// same). Redis goes back to a snapshot at 10 (a failover to a replica
// that had not received them). Proxy 2, still running on the machine
// that saw the tree count 20, checks only what it saw itself (1 call,
// its own p: and the machine's m: it raised) and forwards 20 more: 40 on
// 30, if it checked only what it saw itself.
//
// Held: each write of a counts file is counted in the state directory's
// counts-epoch, which every proxy maps and reads at each reservation (no
// system call); proxy 2 reads the counts file proxy 1 wrote at its exit
// before its next call, and refuses store_reset.
func TestE2EFaultRunningPeerLearnsTheMachinesCounts(t *testing.T) {
	f := newStoreFleet(t)
	p2, s2 := f.start(f.a, "", nil)
	if n, typ, detail := drain(t, s2, 1); n != 1 {
		t.Fatalf("proxy 2's call: %s: %s", typ, detail)
	}
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 9)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	f.restore(snap)
	more, typ, detail := drain(t, s2, 40)
	total := 1 + n + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1's proxies made %d calls (proxy 1 the last %d, then stopped), Redis went back to %d: proxy 2, running on the machine all along, forwarded %d more (%d on 30), then %s: %s; want none, store_reset", 1+n+m, m, 1+n, more, total, typ, detail)
	}
}
