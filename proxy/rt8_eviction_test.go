//go:build unix && redteam

package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// RT8: `CONFIG SET maxmemory-policy allkeys-lru` on the spend store's
// Redis after the proxies started (the start refuses it; nothing checks
// it after), then memory pressure (another application's keys). LRU
// evicts the coldest keys first: an idle tree's keys and stamp, and the
// lists of trees (read only when a tree has no stamp); the test fills
// Redis until every key of the store is gone. The proxies have
// exited; a proxy on a new machine then finds no trace of the tree and
// takes it for a new one, once the policy is set back to noeviction (the
// operator's undo, or a restart from redis.conf). A running proxy that saw
// the tree would refuse it; this is the documented new-machine case of a
// whole-store loss, reached by a run-time policy change nothing watches.
func TestRedTeamRT8EvictionPolicyChangedAfterStart(t *testing.T) {
	f := newStoreFleet(t)
	ctx := context.Background()
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	c := f.srv.Client()
	if err := c.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var mem int64
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			mem, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(mem+1<<20, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("x", 4096)
	gone := false
	for i := 0; i < 20000 && !gone; i++ {
		if err := c.Set(ctx, "app:"+strconv.Itoa(i), filler, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if i%64 == 0 {
			k, err := c.Keys(ctx, "delegateos:*").Result()
			if err != nil {
				t.Fatal(err)
			}
			gone = len(k) == 0
		}
	}
	if !gone {
		t.Fatal("the store's keys were never all evicted")
	}
	left, _ := c.Keys(ctx, "delegateos:*").Result()
	t.Logf("the store's keys left after eviction: %v", left)
	// The operator sets the policy back (or Redis restarts from its
	// redis.conf, its append-only file holding the evictions).
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir(), WantExit: func(int) bool { return true }})
	s2 := p2.Connect(mcptest.SessionOptions{})
	more, typ, detail := drain(t, s2, 40)
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, n+more)
	if more > 0 || (typ != string(gate.StoreReset) && typ != string(gate.StoreUnavailable)) {
		t.Fatalf("%d calls; maxmemory-policy allkeys-lru set at run time, the tree's keys evicted; a proxy on a new machine forwarded %d more (%d on 30), then %s: %s", n, more, n+more, typ, detail)
	}
}
