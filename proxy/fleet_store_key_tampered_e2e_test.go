//go:build unix

package proxy_test

import (
	"context"
	"testing"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// RT8: a level's spend key replaced by a value of another type (a string
// where the hash was: an operator's SET on the wrong key). The call must
// be refused store_unavailable or store_reset, never forwarded, never
// budget_exceeded; `delegateos spend` must not show a normal budget.
func TestE2EFaultSpendKeyOfAnotherType(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 30*fleetCost, 30*fleetCost)
	ctx := context.Background()
	rc := f.srv.Client()
	p, s := f.start(f.b, "", nil)
	n1, _, _ := drain(t, s, 5)
	f.settled()
	key := "delegateos:spend:{" + f.e.Root.ID() + "}:" + f.key(2)
	if err := rc.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Set(ctx, key, "0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	n2, typ, detail := drain(t, s, 40)
	f.sameAsUpstreams([]*mcptest.Process{p}, n1+n2)
	us, err := budget.ReadUsage(f.url)
	t.Logf("after: forwarded %d+%d, then %s: %s; spend: %+v, %v", n1, n2, typ, detail, us, err)
	if n2 > 0 || (typ != string(gate.StoreUnavailable) && typ != string(gate.StoreReset)) {
		t.Fatalf("B's spend key a string: %d more forwarded, then %s: %s; want none, store_unavailable or store_reset", n2, typ, detail)
	}
	out, errs, code := mcptest.CLI(t, "spend", "--store", f.url)
	if code == 0 {
		t.Fatalf("delegateos spend with B's key a string: exit 0:\n%s%s", out, errs)
	}
}

// RT8: RENAME of the root's spend key to another name, and back later:
// between, the tree's calls must be refused (store_reset), and after the
// rename back the tree stays refused until an operator acts (its keys'
// history was broken).
func TestE2EFaultRootKeyRenamedAway(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	ctx := context.Background()
	rc := f.srv.Client()
	p, s := f.start(f.a, "", nil)
	n1, _, _ := drain(t, s, 5)
	f.settled()
	key := "delegateos:spend:{" + f.e.Root.ID() + "}:" + f.key(1)
	if err := rc.Rename(ctx, key, key+":away").Err(); err != nil {
		t.Fatal(err)
	}
	n2, typ, detail := drain(t, s, 40)
	if n2 > 0 || typ != string(gate.StoreReset) {
		t.Fatalf("root key renamed away: %d more forwarded, then %s: %s; want none, store_reset", n2, typ, detail)
	}
	if err := rc.Rename(ctx, key+":away", key).Err(); err != nil {
		t.Fatal(err)
	}
	n3, typ, detail := drain(t, s, 40)
	f.sameAsUpstreams([]*mcptest.Process{p}, n1+n2+n3)
	if n1+n2+n3 > 30 || typ != string(gate.StoreReset) {
		t.Fatalf("root key renamed back: %d more forwarded, then %s: %s; want none, store_reset", n3, typ, detail)
	}
}
