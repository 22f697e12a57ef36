//go:build unix && redteam

package proxy_test

// Second red team of issue 19's store history (after wt-storefix): attacks
// that still get calls forwarded past a budget. Each fails on the current
// code; run with: go test -tags redteam -count=1 -run TestRedTeam2 ./proxy/

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/proxy"
)

// R2-3. The same Redis named two ways (127.0.0.1 and localhost): the
// state files are named by the URL's host as written
// (budget/identity.go:215 stateName), so a proxy restarted with the other
// spelling knows no identity and no counts and accepts an older snapshot.
func TestRedTeam2OtherSpellingOfTheSameServer(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := rtDrain(t, s1, 10)
	f.rtSettled()
	snap := f.rtSnapshot()
	m, _, _ := rtDrain(t, s1, 40)
	f.rtSettled()
	rtStop(t, p1)
	f.rtRestore(snap)
	pol := f.policy("")
	pol.SpendStore = strings.Replace(pol.SpendStore, "127.0.0.1", "localhost", 1)
	pol.RevocationList = strings.Replace(pol.RevocationList, "127.0.0.1", "localhost", 1)
	if pol.SpendStore == f.policy("").SpendStore {
		t.Fatalf("store URL %s has no 127.0.0.1", pol.SpendStore)
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s2 := p2.Connect(mcptest.SessionOptions{})
	more, typ, detail := rtDrain(t, s2, 40)
	total := n + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	if total > 30 {
		t.Errorf("the same Redis as localhost, back on a snapshot of %d calls: the restarted proxy forwarded %d more (%d on 30), then %s: %s; want store_reset", n, more, total, typ, detail)
	}
}

// R2-5. Two fleets (two roots) share a Redis. Only fleet 1's tree loses
// its keys (deleted by hand, evicted): fleet 1's proxy rightly refuses
// store_reset, but resetTree → resetNow → markReset
// (budget/identity.go:671, :690, :482) marks the whole store's identity
// reset, so every proxy of fleet 2 started from then on (a stdio proxy
// starts per session) refuses every call of its intact tree, until fleet
// 1's operator acts; fleet 2's running proxy meanwhile goes on forwarding.
func TestRedTeam2OneTreesLossWedgesAnotherFleet(t *testing.T) {
	f1 := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	f2 := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	f2.srv, f2.url = f1.srv, f1.url
	_, s1 := f1.start(f1.a, "", nil)
	_, s2 := f2.start(f2.a, "", nil)
	rtDrain(t, s1, 5)
	rtDrain(t, s2, 5)
	f1.rtSettled()
	f2.rtSettled()
	ctx := context.Background()
	c := f1.srv.Client()
	keys, err := c.Keys(ctx, "delegateos:spend:{"+f1.e.Root.ID()+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("tree 1's spend keys: %v %v", keys, err)
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	if typ, detail := denialData(s1.Call(t, "echo", map[string]any{"text": "tree 1 after"})); typ != string(proxy.StoreReset) {
		t.Fatalf("tree 1 after its keys were deleted: %s: %s, want store_reset", typ, detail)
	}
	if typ, detail := denialData(s2.Call(t, "echo", map[string]any{"text": "tree 2, running proxy"})); typ != "" {
		t.Errorf("tree 2's running proxy after tree 1's loss: %s: %s", typ, detail)
	}
	_, s3 := f2.start(f2.a, "", nil)
	if typ, detail := denialData(s3.Call(t, "echo", map[string]any{"text": "tree 2, new proxy"})); typ != "" {
		t.Errorf("tree 2 (intact) in a proxy started after tree 1 lost its keys: %s: %s; want it forwarded (only tree 1 lost data)", typ, detail)
	}
}

// R2-6. store recover given the audit logs of only some of the fleet's
// proxies (a machine's log not at hand) exits 0 and lifts the reset; the
// proxy whose log was left out saw the root's count at 20, but adopting
// the recovery's generation forgets that count (forgetLifted,
// budget/identity.go:92, from refresh :546), so it spends its calls again.
func TestRedTeam2RecoverWithSomeLogsOnly(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	log1 := filepath.Join(f.e.Dir, "audit-1.log")
	log2 := filepath.Join(f.e.Dir, "audit-2.log")
	_, s1 := f.start(f.a, "proxy_key: "+f.e.KeyFile(mcptest.NewKey(t, "p1"))+"\naudit_log: "+log1+"\n", nil)
	p2, s2 := f.start(f.a, "proxy_key: "+f.e.KeyFile(mcptest.NewKey(t, "p2"))+"\naudit_log: "+log2+"\n", nil)
	n1, _, _ := rtDrain(t, s1, 10)
	n2, _, _ := rtDrain(t, s2, 10)
	f.rtSettled()
	if err := f.srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*mcptest.Session{s1, s2} {
		if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(proxy.StoreReset) {
			t.Fatalf("proxy %d after the flush: %s: %s, want store_reset", i+1, typ, detail)
		}
	}
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log1)
	if code != 0 {
		t.Logf("store recover with one log of two refused: exit %d, %s%s", code, out, errs)
		return // held
	}
	more, typ, detail := rtDrain(t, s2, 40)
	total := n1 + n2 + more
	f.sameAsUpstreams([]*mcptest.Process{p2}, n2+more)
	if total > 30 {
		t.Errorf("store recover with proxy 1's log only (exit 0: %s): proxy 2, which saw %d calls on the root, forwarded %d more (%d on 30), then %s: %s; want store_reset (the store has fewer calls than it saw)", strings.TrimSpace(out), n1+n2, more, total, typ, detail)
	}
}

// R2-7. Generations are wall-clock milliseconds (newIdentity,
// budget/identity.go:150). The store was made by a proxy whose clock ran
// an hour ahead (here: its identity hash written as such a proxy writes
// it). Redis is flushed and the operator, before any proxy notices, runs
// store init --reset: the store has no identity, so nextIdentity (:787)
// takes the operator's clock, an hour behind the generation the proxies
// know. join/refresh adopt an operator's identity only when its
// generation is higher, so the proxies refuse store_reset although the
// operator accepted the loss, and each further init --reset adds 1 ms:
// the fleet is wedged until the operator's clock passes the old
// generation.
func TestRedTeam2OperatorClockBehindWedgesTheFleet(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	ctx := context.Background()
	c := f.srv.Client()
	ahead := time.Now().Add(time.Hour).UnixMilli()
	if err := c.HSet(ctx, "delegateos:store", "id", "0123456789abcdef01234567", "g", ahead, "by", "proxy").Err(); err != nil {
		t.Fatal(err)
	}
	_, s := f.start(f.a, "", nil)
	if n, typ, detail := rtDrain(t, s, 5); n != 5 {
		t.Fatalf("before the flush: %d forwarded, then %s: %s", n, typ, detail)
	}
	f.rtSettled()
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset"); code != 0 {
			t.Fatalf("store init --reset: %d %s %s", code, out, errs)
		}
	}
	if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after init --reset"})); typ != "" {
		t.Errorf("a call after the operator's store init --reset (twice) accepted the flush: %s: %s; want it forwarded", typ, detail)
	}
	_, s2 := f.start(f.a, "", nil)
	if typ, detail := denialData(s2.Call(t, "echo", map[string]any{"text": "new proxy after init --reset"})); typ != "" {
		t.Errorf("a proxy started after store init --reset: %s: %s; want it forwarded", typ, detail)
	}
}
