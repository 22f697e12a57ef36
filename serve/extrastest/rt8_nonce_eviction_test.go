//go:build unix && redteam

package extrastest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// evictNonces makes the server at rs evict keys with a time to live
// (maxmemory-policy volatile-ttl, maxmemory just above what it holds,
// filler keys without one), until no nonce key is left.
func evictNonces(t *testing.T, rs *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	c := rs.Client()
	if err := c.ConfigSet(ctx, "maxmemory-policy", "volatile-ttl").Err(); err != nil {
		t.Fatal(err)
	}
	used, err := c.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var mem int64
	for _, l := range strings.Split(used, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			mem, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(mem+512<<10, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("x", 4096)
	for i := 0; i < 4096; i++ {
		keys, err := c.Keys(ctx, "delegateos:nonce:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			return
		}
		// Without a time to live: volatile-ttl never evicts these. Past
		// what can be evicted, writes fail OOM.
		if err := c.Set(ctx, "filler:"+strconv.Itoa(i), filler, 0).Err(); err != nil && !strings.Contains(err.Error(), "OOM") {
			t.Fatal(err)
		}
	}
	t.Fatal("the nonce keys were never evicted")
}

// RT8: the Redis that holds a fleet's signature nonces has its eviction
// policy changed after the servers started (CONFIG SET maxmemory-policy
// volatile-ttl: an operator's or attacker's change; the start checked
// noeviction only then), and fills: Redis evicts the spent nonces first
// (they are the keys with a time to live), and a signed request accepted
// once is accepted again by the other server.
func TestRedTeamRT8NonceEvictedAfterStartReplayed(t *testing.T) {
	e := mcptest.NewEnv(t)
	rs := redistest.Start(t)
	tok := e.Mint(nil, "mcp:echo:*")
	pol := e.Policy()
	pol.SpendStore = rs.URL()
	a := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature"}})
	b := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature"}})
	hdr := with(mcptest.Bearer(tok), sign(t, e.Agent, "POST", "/mcp", initBody, time.Now()))
	if r := a.Do("POST", "/mcp", hdr, initBody); r.Status != 200 {
		t.Fatalf("server A, a signed initialize: %d %s", r.Status, r.Body)
	}
	evictNonces(t, rs)
	if r := b.Do("POST", "/mcp", hdr, initBody); r.Status == 200 {
		t.Fatalf("server B accepted the signed request server A accepted, once Redis evicted its nonce (maxmemory-policy changed at run time): %d", r.Status)
	}
}
