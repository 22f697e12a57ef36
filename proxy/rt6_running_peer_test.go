//go:build unix && redteam

package proxy_test

import (
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// RT6: what a machine saw reaches the proxies it starts later (the counts
// file, the live records folded at start), never the ones already
// running. Two proxies run on machine 1 (one state directory): proxy 2
// makes 1 call, proxy 1 makes 19 more and stops (cleanly: its counts are
// in the counts file; killed, they would be in its live record — the
// same). Redis goes back to a snapshot at 10 (a failover to a replica
// that had not received them). Proxy 2, still running on the machine
// that saw the tree count 20, checks only what it saw itself (1 call,
// its own p: and the machine's m: it raised) and forwards 20 more: 40 on
// 30. The docs' categories are "a proxy that saw the lost writes, or was
// restarted on a machine whose state directory did" and "a machine that
// never saw them": a running proxy of a machine that saw them falls
// between. Proxy 1's restart would refuse; meanwhile proxy 2 spends.
//
// Fix: a running proxy takes its machine's counts into what it checks:
// storeSeen already reads the counts file under its lock every second
// after a raise; merge it into s.seen/s.mseen too, and read it (and fold
// dead live records) on a timer even when idle — the window is then a
// second, as for the counts' writes; or check the machine's count in the
// script from a per-machine field the proxies share (m:ID is that field:
// keep the machine's highest count in the counts file and have every
// running proxy load it before its next reservation when the file
// changed, by mtime).
func TestRedTeamRT6RunningPeerOfTheMachineMissesItsCounts(t *testing.T) {
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
