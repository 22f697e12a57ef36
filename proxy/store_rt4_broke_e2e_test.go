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
