//go:build unix

package extrastest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// evictNonces makes the server at rs, whose maxmemory-policy is
// volatile-ttl, evict keys with a time to live (maxmemory just above what
// it holds, filler keys without one), until no nonce key is left.
func evictNonces(t *testing.T, rs *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	c := rs.Client()
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

// The Redis that holds a fleet's signature nonces has its eviction policy
// changed after the servers started (CONFIG SET maxmemory-policy
// volatile-ttl: the start checks noeviction only then), and fills: Redis
// evicts the spent nonces first (the keys with a time to live). Before,
// the signed request server A had accepted was accepted again (200) by
// server B (red team 8, RT8-4). Now each server watches the policy and
// the evicted keys off the calls' path: it refuses signed requests while
// the policy may evict, and, once keys were evicted, until every
// signature whose nonce may be gone is stale, even with the policy set
// back. The watch polls every 250 ms: the test waits until B's refuses
// a fresh signed request for the policy before Redis fills (a policy
// changed and keys evicted within one poll are found at the next: the
// replay is refused from then on, see docs/fleet.md).
func TestFleetNonceEvictedAfterStartRefused(t *testing.T) {
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
	c := rs.Client()
	if err := c.ConfigSet(context.Background(), "maxmemory-policy", "volatile-ttl").Err(); err != nil {
		t.Fatal(err)
	}
	waitRefused(t, e, b, tok, "maxmemory-policy is now volatile-ttl", true)
	evictNonces(t, rs)
	if r := b.Do("POST", "/mcp", hdr, initBody); r.Status == 200 {
		t.Fatalf("server B accepted the signed request server A accepted, once Redis evicted its nonce (maxmemory-policy changed at run time): %d", r.Status)
	}
	// The operator sets the policy back: B's watch finds it at its next
	// poll (a fresh signed request is then refused for the lost nonces,
	// no longer for the policy), and the replay is still refused.
	if err := c.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	waitRefused(t, e, b, tok, "may be gone", false)
	if r := b.Do("POST", "/mcp", hdr, initBody); r.Status == 200 {
		t.Fatalf("server B accepted the replay once the policy was set back: %d", r.Status)
	}
}

// waitRefused sends fresh signed requests to srv until one is refused
// with want in its body (the next poll of its eviction watch, every
// 250 ms); a request accepted meanwhile fails the test unless accepted.
func waitRefused(t *testing.T, e *mcptest.Env, srv *mcptest.Server, tok *dct.Token, want string, accepted bool) {
	t.Helper()
	deadline := time.Now().Add(mcptest.WaitTimeout)
	for {
		fresh := with(mcptest.Bearer(tok), sign(t, e.Agent, "POST", "/mcp", initBody, time.Now()))
		r := srv.Do("POST", "/mcp", fresh, initBody)
		if r.Status == 200 && !accepted {
			t.Fatalf("a fresh signed request accepted while waiting for a refusal saying %q", want)
		}
		if id := r.Header.Get("Mcp-Session-Id"); r.Status == 200 && id != "" {
			// Ended, so that the credential's sessions stay under their bound.
			end := with(mcptest.Bearer(tok), sign(t, e.Agent, "DELETE", "/mcp", "", time.Now()), map[string]string{"Mcp-Session-Id": id})
			srv.Do("DELETE", "/mcp", end, "")
		}
		if strings.Contains(string(r.Body), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refusal saying %q: %d %s", want, r.Status, r.Body)
		}
		time.Sleep(25 * time.Millisecond) // the watch's next poll
	}
}
