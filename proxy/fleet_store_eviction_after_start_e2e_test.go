//go:build unix

package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// `CONFIG SET maxmemory-policy allkeys-lru` on the spend store's Redis
// after the proxies started (the start refuses it), then memory pressure
// (another application's keys): LRU evicts an idle tree's keys first.
// Before, nothing watched the policy after the start: once every key of
// the store was gone and the policy set back, a proxy on a new machine
// took the tree for new, 40 forwarded on 30 (red team 8, RT8-8; with
// volatile-ttl the signature nonces, RT8-4). Now a running proxy watches
// the policy and evicted_keys every 250 ms off the calls' path: it
// refuses calls while the policy may evict, and when Redis evicted keys
// it marks the store reset (identity and stamps, made again after each
// poll that finds more evictions, so the mark stays once the policy is
// back), and the proxy on a new machine refuses store_reset.
func TestE2EFaultEvictionPolicyChangedAfterStart(t *testing.T) {
	f := newStoreFleet(t)
	ctx := context.Background()
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	c := f.srv.Client()
	polls := configGets(t, c)
	if err := c.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	// The running proxy's watch reads the policy every 250 ms (CONFIG
	// GET): once two reads have begun since the change, the first has
	// ended, and its calls are refused, store_unavailable, nothing
	// forwarded. (Without a watch the wait ends at its timeout, and the
	// call shows what the proxy does.)
	waitFor(func() bool { return configGets(t, c) >= polls+2 })
	more, typ, detail := drain(t, s1, 1)
	if more > 0 || typ != string(gate.StoreUnavailable) || !strings.Contains(detail, "allkeys-lru") {
		t.Fatalf("under allkeys-lru the running proxy forwarded %d, then %s: %s", more, typ, detail)
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
	// Filled until the tree's spend keys are gone (the running proxy
	// writes its marks again meanwhile, and they are evicted again).
	filler := strings.Repeat("x", 4096)
	gone := false
	for i := 0; i < 20000 && !gone; i++ {
		if err := c.Set(ctx, "app:"+strconv.Itoa(i), filler, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if i%64 == 0 {
			k, err := c.Keys(ctx, "delegateos:spend:*").Result()
			if err != nil {
				t.Fatal(err)
			}
			gone = len(k) == 0
		}
	}
	if !gone {
		t.Fatal("the store's spend keys were never evicted")
	}
	left, _ := c.Keys(ctx, "delegateos:*").Result()
	t.Logf("the store's keys left after eviction: %v", left)
	// The operator sets the policy back (or Redis restarts from its
	// redis.conf, its append-only file holding the evictions).
	polls = configGets(t, c)
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	// The running proxy's mark, which nothing evicts now, and its watch
	// past a read of the policy set back.
	waitFor(func() bool {
		why, _ := c.HGet(ctx, "delegateos:store", "reset").Result()
		return why != "" && configGets(t, c) >= polls+2
	})
	more, typ, detail = drain(t, s1, 1)
	if more > 0 || typ != string(gate.StoreReset) {
		t.Fatalf("the running proxy, after Redis evicted keys: %d forwarded, then %s: %s", more, typ, detail)
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir(), WantExit: func(int) bool { return true }})
	s2 := p2.Connect(mcptest.SessionOptions{})
	more, typ, detail = drain(t, s2, 40)
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, n+more)
	if more > 0 || typ != string(gate.StoreReset) {
		t.Fatalf("%d calls; maxmemory-policy allkeys-lru set at run time, the tree's keys evicted; a proxy on a new machine forwarded %d more (%d on 30), then %s: %s", n, more, n+more, typ, detail)
	}
}

// configGets returns how many CONFIG GET the server has run (INFO
// commandstats): the proxies' eviction watches run one per poll.
func configGets(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "cmdstat_config|get:calls="); ok {
			v, _, _ = strings.Cut(v, ",")
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// waitFor polls cond every 10 ms until it holds or mcptest.WaitTimeout
// has passed: the test goes on either way, and its checks then say what
// the proxies did.
func waitFor(cond func() bool) {
	deadline := time.Now().Add(mcptest.WaitTimeout)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}
