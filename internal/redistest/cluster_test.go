package redistest

import (
	"context"
	"testing"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// A cluster starts ok, a cluster client reaches every shard through it,
// and a failover leaves it ok with the replica serving the slots and the
// data it had.
func TestCluster(t *testing.T) {
	c := StartCluster(t)
	cl, err := redisconn.Open(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "{x}1", "{x}2"} {
		if err := cl.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	primary, replica := c.PrimaryFor("a")
	c.Failover(replica)
	if p, _ := c.PrimaryFor("a"); p != replica {
		t.Fatalf("after the failover %s serves a, not %s (was %s)", p.Addr(), replica.Addr(), primary.Addr())
	}
	for _, k := range []string{"a", "b", "c", "{x}1", "{x}2"} {
		if v, err := cl.Get(ctx, k).Result(); err != nil || v != k {
			t.Fatalf("%s: %q %v", k, v, err)
		}
	}
}
