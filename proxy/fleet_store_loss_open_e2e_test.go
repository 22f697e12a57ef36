//go:build unix

package proxy_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Only the tree's open-reservations hash is lost (DEL by hand, eviction, a
// partial restore) while a call is in flight: its commit finds no open
// reservation and ends nothing, so its cost would stay held for ever. The
// next call finds cost held with no open reservation and is refused
// store_reset, naming the hash; store recover from the audit log releases
// what was held for the lost reservation and rebuilds the spend with the
// call in flight, and the budget holds: 30 calls on 30, the store exactly
// what was forwarded, nothing held (rtstore2 R2-4).
func TestE2EFaultOpenReservationsHashLost(t *testing.T) {
	f := newStoreFleet(t)
	log := filepath.Join(f.e.Dir, "audit.log")
	p, s := f.start(f.a, f.audited("proxy", log), nil)
	n, _, _ := drain(t, s, 3)
	f.settled()
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
	typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after"}))
	if typ != string(gate.StoreReset) || !strings.Contains(detail, "open reservations") {
		t.Fatalf("the call after the open reservations were lost: %q %s; want store_reset naming the open reservations", typ, detail)
	}
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log)
	if code != 0 {
		t.Fatalf("store recover: exit %d, %s%s", code, out, errs)
	}
	if u := f.usage()[f.key(1)]; u.Reserved != 0 || u.Committed != (n+1)*fleetCost {
		t.Fatalf("after store recover: %d committed, %d held; want the %d calls forwarded (%d), none held", u.Committed, u.Reserved, n+1, (n+1)*fleetCost)
	}
	more, typ, detail := drain(t, s, 40)
	if typ != string(dct.BudgetExceeded) {
		t.Fatalf("after store recover: %d forwarded, then %q %s; want budget_exceeded", more, typ, detail)
	}
	f.sameAsUpstreams([]*mcptest.Process{p}, n+more) // echo calls; the slow one besides
	if total := n + more + 1; total != 30 {
		t.Errorf("%d calls forwarded on a budget of 30 (%d before the loss, the slow one, %d after the recovery)", total, n, more)
	}
	f.settled()
	if u := f.usage()[f.key(1)]; u.Committed != 30*fleetCost {
		t.Errorf("the store counts %d committed, %d held; want the 30 calls forwarded (%d)", u.Committed, u.Reserved, 30*fleetCost)
	}
}
