//go:build unix

package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// RT8: the slot of a delegation tree migrated to another primary while
// two proxies spend it (as `redis-cli --cluster reshard` does: SETSLOT
// IMPORTING/MIGRATING, MIGRATE one key at a time, SETSLOT NODE), calls
// made between each key's move: while the slot is split, scripts get ASK
// or TRYAGAIN. Wanted: no level passes its budget, no call forwarded
// uncharged, refusals only store_unavailable (never store_reset or
// budget_exceeded before the budget is spent), and once the slot has
// moved the tree spends its budget to the end.
func TestE2EFaultClusterSlotMigratedMidBurst(t *testing.T) {
	c := redistest.StartCluster(t)
	f := newFleetOn(t, c.URL(), 30*fleetCost, 30*fleetCost, 30*fleetCost)
	ctx := context.Background()
	p1, s1 := f.start(f.a, "", nil)
	p2, s2 := f.start(f.a, "", nil)
	sessions := []*mcptest.Session{s1, s2}
	var forwarded int64
	types := map[string]int{}
	call := func(n int) {
		for i := range n {
			r := sessions[i%2].Call(t, "echo", map[string]any{"text": "x"})
			if r.Err == nil && !r.Res.IsError {
				forwarded++
				continue
			}
			typ, detail := denialData(r)
			types[typ]++
			if typ != string(gate.StoreUnavailable) && !(typ == string(dct.BudgetExceeded) && forwarded == 30) {
				t.Errorf("call with the slot split (%d forwarded): %s: %s", forwarded, typ, detail)
			}
		}
	}
	call(5)
	tag := "{" + f.e.Root.ID() + "}"
	source, _ := c.PrimaryFor(tag)
	var target *redistest.Server
	var primaries []*redistest.Server
	for _, n := range c.Nodes {
		info, err := n.Client().Info(ctx, "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "role:master\r\n") {
			primaries = append(primaries, n)
			if n != source && target == nil {
				target = n
			}
		}
	}
	id := func(s *redistest.Server) string {
		v, err := s.Client().Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	slot, err := source.Client().ClusterKeySlot(ctx, tag).Result()
	if err != nil {
		t.Fatal(err)
	}
	do := func(s *redistest.Server, args ...any) {
		t.Helper()
		if err := s.Client().Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, s.Addr(), err)
		}
	}
	do(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", id(source))
	do(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", id(target))
	keys, err := source.Client().ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("slot %d: %d keys %v, %s → %s", slot, len(keys), keys, source.Addr(), target.Addr())
	host, port, _ := strings.Cut(target.Addr(), ":")
	for _, k := range keys {
		if err := source.Client().Migrate(ctx, host, port, k, 0, mcptest.WaitTimeout).Err(); err != nil {
			t.Fatalf("MIGRATE %s: %v", k, err)
		}
		call(3)
	}
	call(3)
	for _, n := range append([]*redistest.Server{target, source}, primaries...) {
		do(n, "CLUSTER", "SETSLOT", slot, "NODE", id(target))
	}
	c.WaitOK()
	call(60)
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, forwarded)
	u := f.usage()[f.key(1)]
	t.Logf("forwarded %d; refusals %v; the root's spend %+v", forwarded, types, u)
	if forwarded > 30 {
		t.Fatalf("%d forwarded on 30 across the slot's migration", forwarded)
	}
	if forwarded < 30 {
		t.Errorf("only %d forwarded on 30 once the slot moved (refusals %v)", forwarded, types)
	}
	if u.Committed+u.Reserved != forwarded*fleetCost {
		t.Errorf("the root's spend %d+%d, %d forwarded", u.Committed, u.Reserved, forwarded)
	}
	_ = fmt.Sprint
	_ = strconv.Itoa
}
