//go:build unix

package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// rt8Replicas returns the cluster's replicas (nodes whose role is slave).
func rt8Replicas(t *testing.T, c *redistest.Cluster) []*redistest.Server {
	t.Helper()
	var out []*redistest.Server
	for _, n := range c.Nodes {
		info, err := n.Client().Info(context.Background(), "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "role:slave\r\n") {
			out = append(out, n)
		}
	}
	return out
}

// RT8: a redis+cluster:// URL whose seeds are all replicas. The proxies
// must learn the primaries from them and spend on the primaries: no more
// than the budget, all of it spendable.
func TestE2EFaultClusterSeedsAtReplicas(t *testing.T) {
	c := redistest.StartCluster(t)
	var seeds []string
	for _, r := range rt8Replicas(t, c) {
		seeds = append(seeds, r.Addr())
	}
	f := newFleetOn(t, "redis+cluster://"+strings.Join(seeds, ",")+"/0", 30*fleetCost, 30*fleetCost, 30*fleetCost)
	p1, s1 := f.start(f.a, "", nil)
	p2, s2 := f.start(f.a, "", nil)
	var n int64
	var typ, detail string
	for range 40 {
		for _, s := range []*mcptest.Session{s1, s2} {
			r := s.Call(t, "echo", map[string]any{"text": "x"})
			if r.Err == nil && !r.Res.IsError {
				n++
				continue
			}
			typ, detail = denialData(r)
		}
	}
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, n)
	if n != 30 || typ != string(dct.BudgetExceeded) {
		t.Fatalf("seeds at replicas: %d forwarded on 30, then %s: %s", n, typ, detail)
	}
}
