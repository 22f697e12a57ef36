//go:build unix

package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/proxy"
)

// The fault table of a fleet on Redis (issue 19): each fault, through the
// real binaries on a real redis-server. For each, no level forwards more
// calls than its budget, calls are refused with the denial type that
// says what happened, and delegateos spend tells the truth.

// A server that may evict keys (allkeys-lru) would drop a tree's spend
// under memory pressure and let it be spent again: the proxy refuses to
// start on it, naming the setting to change.
func TestE2EFaultEvictionRefusedAtStart(t *testing.T) {
	f := newFleet(t, 10*fleetCost, 10*fleetCost, 10*fleetCost)
	if err := f.srv.Client().ConfigSet(context.Background(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, WantExit: func(code int) bool { return code != 0 }})
	if !p.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("the proxy started on a Redis with maxmemory-policy allkeys-lru")
	}
	if msg := p.Stderr.String(); !strings.Contains(msg, "maxmemory-policy allkeys-lru") || !strings.Contains(msg, "noeviction") {
		t.Fatalf("the proxy's message does not name the eviction policy and its fix: %s", msg)
	}
	// With noeviction it starts, and warns when nothing persists.
	ctx := context.Background()
	f.srv.Client().ConfigSet(ctx, "maxmemory-policy", "noeviction")
	f.srv.Client().ConfigSet(ctx, "appendonly", "no")
	p2, s := f.start(f.a, "", nil)
	s.Call(t, "echo", map[string]any{"text": "x"}).OK(t, "a call on a noeviction store")
	p2.WaitLog("the spend store "+f.srv.URL()+f.timeouts+" has persistence off (appendonly no, no save): a restart of Redis forgets every budget's spend, rate window and revocation, and the proxies refuse calls (store_reset) until an operator runs 'delegateos store recover'; set appendonly yes and appendfsync always", nil)
}

// A store failure is never reported as budget_exceeded, which a client
// reads as "the budget is spent" when the call could be retried: Redis out
// of memory under noeviction, and a field of a tree's spend that is not a
// number, are store_unavailable, and nothing is forwarded.
func TestE2EFaultStoreErrorsAreNotBudgetExceeded(t *testing.T) {
	f := newFleet(t, 10*fleetCost, 10*fleetCost, 10*fleetCost)
	_, s := f.start(f.a, "", nil)
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "a call before the fault")
	// Its commit settled, so that the next reservation carries none (a
	// script that has deleted may go on writing past maxmemory).
	mcptest.Eventually(t, "the first call settled", func() bool { return f.usage()[f.key(1)].Reserved == 0 })
	ctx := context.Background()
	c := f.srv.Client()
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	r := s.Call(t, "echo", map[string]any{"text": "out of memory"})
	if typ, detail := denialData(r); typ != string(proxy.StoreUnavailable) || !strings.Contains(detail, "OOM") {
		t.Fatalf("a call while Redis is out of memory: %+v (%s: %s), want store_unavailable naming OOM", r, typ, detail)
	}
	c.ConfigSet(ctx, "maxmemory", "0")
	s.Call(t, "echo", map[string]any{"text": "after"}).OK(t, "a call once Redis has memory again")
	if err := c.HSet(ctx, "delegateos:spend:{"+f.e.Root.ID()+"}:"+f.key(1), "c", "lots").Err(); err != nil {
		t.Fatal(err)
	}
	r = s.Call(t, "echo", map[string]any{"text": "corrupted"})
	if typ, detail := denialData(r); typ != string(proxy.StoreUnavailable) || typ == string(dct.BudgetExceeded) {
		t.Fatalf("a call on a corrupted field: %+v (%s: %s), want store_unavailable", r, typ, detail)
	}
}
