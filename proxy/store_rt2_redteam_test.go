//go:build unix && redteam

package proxy_test

// Second red team of issue 19's store history (after wt-storefix): attacks
// that still get calls forwarded past a budget. Each fails on the current
// code; run with: go test -tags redteam -count=1 -run TestRedTeam2 ./proxy/

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
	"github.com/delegateos/delegateos/proxy"
)

// R2-4. Only the tree's open-reservations hash is lost (DEL by hand, a
// partial restore) while a call is in flight: its commit finds no open
// reservation (commitScript, budget/redis.go:298) and does nothing, so
// its cost stays held for ever, never committed; and nothing raises
// store_reset: later calls are forwarded as if nothing was lost.
func TestRedTeam2OpenReservationsHashLost(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	_, s := f.start(f.a, "", nil)
	rtDrain(t, s, 3)
	f.rtSettled()
	done := make(chan mcptest.Result, 1)
	go func() { done <- s.Call(t, "slow", map[string]any{"steps": 10, "delay_ms": 100}) }()
	mcptest.Eventually(t, "the slow call's reservation", func() bool { return f.usage()[f.key(1)].Reserved == fleetCost })
	ctx := context.Background()
	c := f.srv.Client()
	keys, err := c.Keys(ctx, "delegateos:open:{"+f.e.Root.ID()+"}*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the tree's open-reservations hash: %v %v", keys, err)
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	(<-done).OK(t, "the slow call")
	r := s.Call(t, "echo", map[string]any{"text": "after"})
	typ, detail := denialData(r)
	if typ == string(proxy.StoreReset) {
		return // found
	}
	// The echo's commit lands after the slow call's (one proxy, one queue).
	mcptest.Eventually(t, "the echo committed", func() bool { return f.usage()[f.key(1)].Committed >= 4*fleetCost })
	if u := f.usage()[f.key(1)]; u.Reserved != 0 {
		t.Errorf("open-reservations hash deleted with a call in flight: the next call was %q %s, and the store shows %d committed, %d held for ever; want store_reset, or the held cost committed", typ, detail, u.Committed, u.Reserved)
	}
}

// R2-9. The ended-delegation set has no history of its own: it is
// grow-only only while a proxy that knows an ending runs (WriteBack,
// chain/redis.go:55). Stdio proxies run per session: with none running, a
// FLUSHALL (or a restart without persistence) loses the ending silently,
// and a proxy of another workspace on the same machine (same state
// directory, which saw the store) takes the completed delegation's token
// again, with no store_reset.
func TestRedTeam2EndedSetLostWhileNoProxyRuns(t *testing.T) {
	srv := redistest.Start(t)
	r := newDelegationRun(t)
	ws1 := filepath.Join(r.e.Dir, "ws1")
	r.p, r.s = startEndedWorkspace(t, r, srv, ws1)
	r.ws = ws1
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	if done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 100); done.Status != "completed" {
		t.Fatalf("complete: %+v", done)
	}
	rtStop(t, r.p)
	if err := srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	_, other := startEndedWorkspace(t, r, srv, filepath.Join(r.e.Dir, "ws2"))
	got := other.CallAs(t, r.bTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
	if typ, _ := denialData(got); typ == "" {
		t.Errorf("completed delegation %s, its ending flushed while no proxy ran: a proxy of another workspace on the same machine forwarded its call; want it refused (ended, or the set's loss found)", delB)
	}
}
