//go:build unix && redteam

package proxy_test

// Fourth red team of issue 19's store history (after the R3 fixes):
// attacks that broke the product. Run with -tags redteam; each moves to
// the normal suite once fixed.

import (
	"context"
	"strconv"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// R4-1. Redis goes back to an older snapshot (a failover to a replica
// that lagged, an RDB restart) while machine 1's proxy, which saw the
// root count 20, idles. Machine 2's proxy, which never saw the tree,
// makes 10 calls (it cannot know), taking the root's count back to 20.
// Machine 1's proxy then compares its 20 with the store's 20 and goes on:
// the rollback is never noticed, and machine 1 forwards 10 more (40 on
// 30). Want: machine 1 refuses store_reset (its own calls are gone).
func TestRedTeam4RollbackMaskedByAnotherMachine(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	f.restore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	k, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
	more, typ, detail := drain(t, s1, 40)
	total := n + m + k + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls, Redis went back to a snapshot of %d, machine 2 made %d: machine 1's proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n+m, n, k, more, total, typ, detail)
	}
}

// R4-2. R4-1 with machine 1's proxy stopped before the rollback and
// started again after machine 2's calls: its machine's counts (20) are
// compared with the store's count, which machine 2 took back to 20.
func TestRedTeam4RollbackMaskedBeforeRestart(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	f.restore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	k, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
	p3, s3 := f.start(f.a, "", nil)
	more, typ, detail := drain(t, s3, 40)
	total := n + m + k + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls and stopped, Redis went back to a snapshot of %d, machine 2 made %d: machine 1's restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n+m, n, k, more, total, typ, detail)
	}
}

// R4-3. R4-1 within one machine: proxies A and B share a state
// directory (stdio proxies run per session). A makes 5 calls and idles;
// B takes the root to 20. Redis goes back to the snapshot at 10; A, which
// saw 5, makes 10 calls (the count back at 20); B then goes on.
func TestRedTeam4RollbackMaskedBySameMachineProxy(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	pa, sa := f.start(f.a, "", nil)
	na, _, _ := drain(t, sa, 5)
	pb, sb := f.start(f.a, "", nil)
	nb, _, _ := drain(t, sb, 5)
	f.settled()
	snap := f.snapshot()
	mb, _, _ := drain(t, sb, 10)
	f.settled()
	f.restore(snap)
	ka, typa, _ := drain(t, sa, 10)
	more, typ, detail := drain(t, sb, 40)
	total := na + nb + mb + ka + more
	f.sameAsUpstreams([]*mcptest.Process{pa, pb}, total)
	if total > 30 || typ != string(gate.StoreReset) {
		t.Errorf("A made %d calls, B %d, Redis went back to a snapshot at %d, A made %d more (then %q); B forwarded %d more (%d on 30), then %s: %s; want store_reset, at most 30", na, nb+mb, na+nb, ka, typa, more, total, typ, detail)
	}
}

// R4-6. The rate-limit windows of a tree are lost alone (DEL by hand,
// eviction after CONFIG SET maxmemory-policy, a partial restore), its
// spend keys and stamp kept: nothing checks them, and a delegation that
// used its 5 calls an hour gets 5 more. Want: refused (rate_limited, or
// store_reset: the store lost the tree's windows).
func TestRedTeam4RateWindowsLostAlone(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 60*fleetCost, 30*fleetCost)
	p, s := f.start(f.b, "rate: 5/1h\n", nil)
	for i := range 5 {
		s.Call(t, "echo", map[string]any{"text": strconv.Itoa(i)}).OK(t, "a call within the rate")
	}
	if typ, _ := denialData(s.Call(t, "echo", map[string]any{"text": "sixth"})); typ != string(gate.RateLimited) {
		t.Fatalf("the sixth call in the hour: %s, want rate_limited", typ)
	}
	ctx := context.Background()
	c := f.srv.Client()
	keys, err := c.Keys(ctx, "delegateos:rate:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the rate windows: %v %v", keys, err)
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	more, typ, detail := drain(t, s, 10)
	f.sameAsUpstreams([]*mcptest.Process{p}, 5+more)
	if more != 0 {
		t.Errorf("5 calls on a rate of 5 an hour, the tree's rate windows deleted: %d more forwarded within the hour, then %s: %s; want none", more, typ, detail)
	}
}
