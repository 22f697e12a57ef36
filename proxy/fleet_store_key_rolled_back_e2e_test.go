//go:build unix

package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// One level's spend key moved back alone: RESTORE … REPLACE of an
// earlier DUMP of B's key (an operator "repairing" a key from a backup),
// the root's key and the tree's stamp left as they are. B's budget is 30:
// 5 calls, B's key dumped, 25 more (B spent), the dump restored over B's
// key, then up to 40 more. Before, the reservation checked the count of
// calls of the chain's first key only: 55 forwarded on B's 30, and
// `delegateos spend` showed B 30 of 30. Now the stamp records each key's
// count at its last reservation, and a key counting fewer refuses the
// tree store_reset; spend says the store lost data.
func TestE2EFaultSubLevelKeyRolledBackFound(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 30*fleetCost, 30*fleetCost)
	ctx := context.Background()
	rc := f.srv.Client()
	key := "delegateos:spend:{" + f.e.Root.ID() + "}:" + f.key(2)
	p, s := f.start(f.b, "", nil)
	n1, _, _ := drain(t, s, 5)
	f.settled()
	dump, err := rc.Dump(ctx, key).Result()
	if err != nil {
		t.Fatalf("DUMP of B's key: %v", err)
	}
	n2, typ, detail := drain(t, s, 40)
	if n1+n2 != 30 || typ != string(dct.BudgetExceeded) {
		t.Fatalf("B's calls: %d+%d, then %s %s; want 30, budget_exceeded", n1, n2, typ, detail)
	}
	f.settled()
	if err := rc.RestoreReplace(ctx, key, 0, dump).Err(); err != nil {
		t.Fatal(err)
	}
	n3, typ, detail := drain(t, s, 40)
	f.sameAsUpstreams([]*mcptest.Process{p}, n1+n2+n3)
	if n3 > 0 || typ != string(gate.StoreReset) {
		t.Fatalf("B's key moved back alone to its state after %d calls: %d more forwarded (%d on B's 30), then %s: %s; want none, store_reset", n1, n3, n1+n2+n3, typ, detail)
	}
	if out, errs, code := mcptest.CLI(t, "spend", "--store", f.srv.URL()); code == 0 || !strings.Contains(errs, "lost data") {
		t.Fatalf("spend after B's key moved back: exit %d, %s%s", code, out, errs)
	}
	// The operator accepts the loss of the tree: B's key as it is now
	// (5 calls' spend) is taken, and the proxy goes on from there.
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset", "--root", f.e.Root.ID()); code != 0 {
		t.Fatalf("store init --reset --root: exit %d, %s%s", code, out, errs)
	}
	n4, typ, detail := drain(t, s, 40)
	f.sameAsUpstreams([]*mcptest.Process{p}, n1+n2+n4)
	if n4 != 25 || typ != string(dct.BudgetExceeded) {
		t.Fatalf("after store init --reset --root: %d forwarded, then %s: %s; want 25 (B's key held 5), budget_exceeded", n4, typ, detail)
	}
}
