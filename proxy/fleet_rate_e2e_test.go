//go:build unix

package proxy_test

// Rate limits across a fleet, through the real binary: with the spend
// store in Redis, every proxy counts against the same windows, kept in
// that Redis on its clock, and a Redis that does not answer refuses.

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Two proxies on one Redis spend store, under two sub-delegations of one
// delegation, with `rate: 5/1m` on the policy: twelve calls at once,
// spread over both, admit exactly five (the window of the delegation
// above both is shared); the other seven are rate_limited and say when
// to retry.
func TestE2EFleetRateLimitShared(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	var procs []*mcptest.Process
	var sessions []*mcptest.Session
	for _, tok := range []*dct.Token{f.b, f.c} {
		p, s := f.start(tok, "rate: 5/1m\n", nil)
		procs = append(procs, p)
		sessions = append(sessions, s)
	}
	var (
		mu       sync.Mutex
		admitted int
		limited  []rateData
		wg       sync.WaitGroup
	)
	for i := range 12 {
		wg.Go(func() {
			r := sessions[i%2].Call(t, "echo", map[string]any{"text": strconv.Itoa(i)})
			mu.Lock()
			defer mu.Unlock()
			if r.Err == nil && !r.Res.IsError {
				admitted++
				return
			}
			d, ok := rateLimited(r)
			if !ok {
				t.Errorf("call %d: %v %+v; want allowed or rate_limited", i, r.Err, r.RPC)
				return
			}
			limited = append(limited, d)
		})
	}
	wg.Wait()
	if admitted != 5 || len(limited) != 7 {
		t.Fatalf("%d calls admitted and %d rate_limited; want 5 and 7", admitted, len(limited))
	}
	root := f.ids[0]
	for _, d := range limited {
		if d.RetryAfterMs <= 0 || d.RetryAfterMs > 60_000 {
			t.Errorf("retryAfterMs %d; want within the minute", d.RetryAfterMs)
		}
		if !strings.HasPrefix(d.Detail, "delegation "+root+" has made 5 calls in the last 1m, the policy's rate: 5/1m") {
			t.Errorf("detail %q; want the shared delegation %s named", d.Detail, root)
		}
	}
	mcptest.Eventually(t, "the admitted calls to settle", func() bool {
		u := f.usage()[f.key(1)]
		return u.Committed == 5*fleetCost && u.Reserved == 0
	})
	for _, p := range procs {
		if log := p.Log(); strings.Contains(log, "rate-limit windows are kept in memory") {
			t.Errorf("the proxy warns that its windows are its own:\n%s", log)
		}
	}
}

// With the spend store in Redis and Redis down, a rated call is refused
// store_unavailable by the rate-limit check, never admitted; Redis
// restarted from its append-only file still holds the window, so the
// fleet admits no more than the limit across the restart.
func TestE2EFleetRateLimitRedisDown(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	pol := f.e.Policy(mcptest.Priced("echo", fleetCost))
	pol.SpendStore = f.srv.URL() + f.timeouts
	pol.Extra = "rate: 5/1m\n"
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s := p.Connect(mcptest.SessionOptions{})
	admitted := 0
	call := func(i int) (ok bool, typ, detail string) {
		r := s.Call(t, "echo", map[string]any{"text": strconv.Itoa(i)})
		if r.Err == nil && !r.Res.IsError {
			admitted++
			return true, "", ""
		}
		typ, detail = denialData(r)
		return false, typ, detail
	}
	for i := range 3 {
		if ok, typ, detail := call(i); !ok {
			t.Fatalf("call %d: %s: %s", i, typ, detail)
		}
	}
	f.srv.Stop()
	ok, typ, detail := call(100)
	if ok || typ != string(gate.StoreUnavailable) || !strings.Contains(detail, "rate-limit store") {
		t.Fatalf("a call while Redis is down: allowed %v, %s: %s; want store_unavailable from the rate-limit store", ok, typ, detail)
	}
	f.srv.Restart()
	mcptest.Eventually(t, "a call allowed after the restart", func() bool {
		ok, typ, detail := call(200)
		if !ok && typ != string(gate.StoreUnavailable) {
			t.Fatalf("after the restart: %s: %s", typ, detail)
		}
		return ok
	})
	for i := 0; ; i++ {
		ok, typ, detail := call(300 + i)
		if ok {
			continue
		}
		if typ != string(gate.RateLimited) {
			t.Fatalf("after the restart: %s: %s", typ, detail)
		}
		break
	}
	if admitted != 5 {
		t.Fatalf("%d calls admitted in the minute across the restart; want 5", admitted)
	}
}
