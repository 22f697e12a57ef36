//go:build unix

package proxy_test

import (
	"context"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// The primary of a tree's shard restarted without its data (no
// persistence, a disk lost), keeping its cluster config, while no proxy
// runs; its replica, kept from failing over, syncs the empty data; the
// other shards are intact. A proxy then started on a new machine must
// refuse the tree store_reset, not take it for a new one. Before, the
// set of the store's trees (delegateos:trees) had a slot of its own: a
// tree on that set's shard lost its stamp and its listing together while
// the identity (on another shard) stayed, and the new proxy forwarded 30
// more calls (40 on 30). Now the set lives in the identity's slot, so it
// is lost only with the identity, whose loss is found by itself.
func TestE2EFaultClusterShardRestartedEmpty(t *testing.T) {
	for _, c := range []struct{ name, with string }{
		{"tree on the shard of the set's old slot", "delegateos:trees"},
		{"tree on the identity's shard", "delegateos:store"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := redistest.StartCluster(t)
			shard, _ := cl.PrimaryFor(c.with)
			var f *fleet
			for {
				f = newFleetOn(t, cl.URL(), 30*fleetCost, 30*fleetCost, 30*fleetCost)
				if p, _ := cl.PrimaryFor("{" + f.e.Root.ID() + "}"); p == shard {
					break
				}
			}
			p1, s1 := f.start(f.a, "", nil)
			n, _, _ := drain(t, s1, 10)
			f.settled()
			stopProxy(t, p1)
			primary, replica := cl.PrimaryFor("{" + f.e.Root.ID() + "}")
			if err := replica.Client().ConfigSet(context.Background(), "cluster-replica-no-failover", "yes").Err(); err != nil {
				t.Fatal(err)
			}
			primary.RestartEmpty()
			cl.WaitOK()
			p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
			more, typ, detail := drain(t, p2.Connect(mcptest.SessionOptions{}), 40)
			f.sameAsUpstreams([]*mcptest.Process{p1, p2}, n+more)
			if more > 0 || typ != string(gate.StoreReset) {
				t.Fatalf("%d calls, the tree's shard restarted empty, a proxy on a new machine: %d more forwarded (%d on 30), then %s: %s; want none, store_reset", n, more, n+more, typ, detail)
			}
		})
	}
}
