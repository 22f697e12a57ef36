//go:build unix

package proxy_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redisset"
	"github.com/delegateos/delegateos/internal/redistest"
)

// fleet is a Redis server, and tokens on one delegation tree: A is the
// root delegation, B narrows it for b and C narrows B for c.
type fleet struct {
	t       *testing.T
	e       *mcptest.Env
	srv     *redistest.Server
	url     string // the store's URL: srv's, or a Redis Cluster's
	a, b, c *dct.Token
	ids     []string // the delegation IDs of A, B and C
	// timeouts are the spend store's Redis timeouts: generous, so that a
	// slow fsync on a loaded machine is not a stall, but for the test of
	// a stall.
	timeouts string
}

const fleetCost = 1000 // microcents per echo

func newFleet(t *testing.T, budgetA, budgetB, budgetC int64) *fleet {
	t.Helper()
	srv := redistest.Start(t)
	f := newFleetOn(t, srv.URL(), budgetA, budgetB, budgetC)
	f.srv = srv
	return f
}

// newFleetOn is newFleet on the store at url.
func newFleetOn(t *testing.T, url string, budgetA, budgetB, budgetC int64) *fleet {
	t.Helper()
	e := mcptest.NewEnv(t)
	f := &fleet{t: t, e: e, url: url, timeouts: "?read_timeout=5s&write_timeout=5s"}
	kb, kc := mcptest.NewKey(t, "b"), mcptest.NewKey(t, "c")
	f.a = e.Mint(func(p *dct.CreateParams) { p.MaxBudgetMicrocents = budgetA }, "mcp:echo:*", "mcp:slow:*")
	attenuate := func(parent *dct.Token, from, to *identity.Keypair, budget int64) *dct.Token {
		tok, err := dct.Attenuate(parent, dct.AttenuateParams{Attenuator: from, Delegatee: to.ID(),
			DelegationID: mcptest.NewDelegationID(), MaxBudgetMicrocents: &budget})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	f.b = attenuate(f.a, e.Agent, kb, budgetB)
	f.c = attenuate(f.b, kb, kc, budgetC)
	u := f.c.Unverified()
	f.ids = []string{u.Authority.DelegationID, u.Attenuations[0].DelegationID, u.Attenuations[1].DelegationID}
	return f
}

// policy is the fleet's policy: echo and slow priced, every store in Redis.
func (f *fleet) policy(extra string) *mcptest.Policy {
	pol := f.e.Policy(mcptest.Priced("echo", fleetCost), mcptest.Priced("slow", fleetCost))
	pol.SpendStore = f.url + f.timeouts
	pol.RevocationList = f.url
	pol.Extra = extra
	return pol
}

// start starts a proxy with tok as its session token.
func (f *fleet) start(tok *dct.Token, extra string, wantExit func(int) bool) (*mcptest.Process, *mcptest.Session) {
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(extra), Token: tok, WantExit: wantExit})
	return p, p.Connect(mcptest.SessionOptions{})
}

// key is the budget key of the first n delegations of the tree.
func (f *fleet) key(n int) string {
	k := f.e.Root.ID()
	for _, id := range f.ids[:n] {
		k += "/" + strconv.Itoa(len(id)) + ":" + id
	}
	return k
}

// usage returns the store's usage by key.
func (f *fleet) usage() map[string]budget.Usage {
	f.t.Helper()
	us, err := budget.ReadUsage(f.url)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]budget.Usage{}
	for _, u := range us {
		out[u.Key] = u
	}
	return out
}

// denialData is the data of a gate's denial.
func denialData(r mcptest.Result) (typ, detail string) {
	if r.RPC == nil || r.RPC.Code != gate.DenialCode {
		return "", ""
	}
	raw, _ := json.Marshal(r.RPC.Data)
	var d struct{ Type, Detail string }
	json.Unmarshal(raw, &d)
	return d.Type, d.Detail
}

// Three proxies, each with 50 calls in parallel, on one delegation tree:
// no level's budget is passed, and the store charges each level exactly
// what was forwarded under it.
func TestE2EFleetNeverPassesABudget(t *testing.T) {
	fleetNeverPassesABudget(t, newFleet(t, 100*fleetCost, 50*fleetCost, 20*fleetCost))
}

// The same on a Redis Cluster of three primaries with a replica each.
func TestE2EFleetClusterNeverPassesABudget(t *testing.T) {
	c := redistest.StartCluster(t)
	fleetNeverPassesABudget(t, newFleetOn(t, c.URL(), 100*fleetCost, 50*fleetCost, 20*fleetCost))
}

// fleetNeverPassesABudget is TestE2EFleetNeverPassesABudget on f, whose
// budgets are 100, 50 and 20 calls.
func fleetNeverPassesABudget(t *testing.T, f *fleet) {
	toks := []*dct.Token{f.a, f.b, f.c}
	sessions := make([]*mcptest.Session, 3)
	for i, tok := range toks {
		_, sessions[i] = f.start(tok, "", nil)
	}
	var allowed [3]atomic.Int64
	var wg sync.WaitGroup
	for i := range 3 {
		for j := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := sessions[i].Call(t, "echo", map[string]any{"text": fmt.Sprintf("%d-%d", i, j)})
				if r.Err == nil && !r.Res.IsError {
					allowed[i].Add(1)
					return
				}
				if typ, detail := denialData(r); typ != string(dct.BudgetExceeded) {
					t.Errorf("proxy %d call %d: %v (%s: %s), want allowed or budget_exceeded", i, j, r.Err, typ, detail)
				}
			}()
		}
	}
	wg.Wait()
	nA, nB, nC := allowed[0].Load(), allowed[1].Load(), allowed[2].Load()
	t.Logf("allowed: %d under A, %d under B, %d under C", nA, nB, nC)
	// Commits at the reserved cost reach Redis in the background.
	mcptest.Eventually(t, "every reservation settled", func() bool {
		for _, u := range f.usage() {
			if u.Reserved != 0 {
				return false
			}
		}
		return true
	})
	u := f.usage()
	for _, lv := range []struct {
		key   string
		calls int64
		limit int64
	}{
		{f.key(1), nA + nB + nC, 100},
		{f.key(2), nB + nC, 50},
		{f.key(3), nC, 20},
	} {
		got := u[lv.key]
		if got.Committed != lv.calls*fleetCost || got.Reserved != 0 {
			t.Errorf("%s: committed %d, reserved %d; want exactly the %d forwarded calls (%d)", lv.key, got.Committed, got.Reserved, lv.calls, lv.calls*fleetCost)
		}
		if lv.calls > lv.limit {
			t.Errorf("%s: %d calls allowed, over its budget of %d", lv.key, lv.calls, lv.limit)
		}
	}
	// Demand (150 calls) is over the root's budget (100), so the fleet
	// fills it exactly: a refusal only ever comes from a level with no room.
	if nA+nB+nC != 100 {
		t.Errorf("%d calls allowed in all, want the root's 100", nA+nB+nC)
	}
}

// A proxy killed (kill -9) with a call in flight leaves the call's
// reservation charged: the rest of the fleet counts it as spent.
func TestE2EFleetKilledProxyStaysCharged(t *testing.T) {
	f := newFleet(t, 2*fleetCost, 2*fleetCost, 2*fleetCost)
	p, s := f.start(f.a, "", func(code int) bool { return code == -1 })
	done := make(chan mcptest.Result, 1)
	go func() { done <- s.Call(t, "slow", map[string]any{"steps": 50, "delay_ms": 100}) }()
	mcptest.Eventually(t, "the slow call's reservation", func() bool { return f.usage()[f.key(1)].Reserved == fleetCost })
	pid := p.UpstreamPID()
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	<-done
	if u := f.usage()[f.key(1)]; u.Reserved != fleetCost || u.Committed != 0 {
		t.Fatalf("after the kill: %+v, want the call's %d still reserved", u, fleetCost)
	}
	_, s2 := f.start(f.a, "", nil)
	s2.Call(t, "echo", map[string]any{"text": "the last room"}).OK(t, "the call that fits beside the charged one")
	r := s2.Call(t, "echo", map[string]any{"text": "one too many"})
	if typ, _ := denialData(r); typ != string(dct.BudgetExceeded) {
		t.Fatalf("a third call on a budget of two: %+v, want budget_exceeded", r)
	}
}

// A Redis restart mid-run: calls refused while it is down are denied
// store_unavailable, none is allowed unmetered, the proxies carry on when
// it is back, and every forwarded call is charged once.
func TestE2EFleetRedisRestart(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	_, s := f.start(f.a, "", nil)
	var forwarded int64
	call := func(i int) (ok bool, typ string) {
		r := s.Call(t, "echo", map[string]any{"text": strconv.Itoa(i)})
		if r.Err == nil && !r.Res.IsError {
			forwarded++
			return true, ""
		}
		typ, _ = denialData(r)
		return false, typ
	}
	for i := range 5 {
		if ok, typ := call(i); !ok {
			t.Fatalf("call %d before the restart: %s", i, typ)
		}
	}
	f.srv.Stop()
	ok, typ := call(100)
	if ok || typ != string(gate.StoreUnavailable) {
		t.Fatalf("a call while Redis is down: allowed %v, type %q; want store_unavailable", ok, typ)
	}
	f.srv.Restart()
	mcptest.Eventually(t, "a call allowed after the restart", func() bool {
		ok, typ := call(200)
		if !ok && typ != string(gate.StoreUnavailable) {
			t.Fatalf("after the restart: %s", typ)
		}
		return ok
	})
	for i := range 5 {
		if ok, typ := call(300 + i); !ok {
			t.Fatalf("call %d after the restart: %s", i, typ)
		}
	}
	mcptest.Eventually(t, "the spend to settle", func() bool {
		u := f.usage()[f.key(1)]
		return u.Committed == forwarded*fleetCost && u.Reserved == 0
	})
}

// A stalled Redis (SIGSTOP): calls are denied store_unavailable within
// the timeout, with a message naming the store; after SIGCONT the proxy
// carries on.
func TestE2EFleetRedisStall(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	f.timeouts = "?read_timeout=500ms&write_timeout=500ms"
	_, s := f.start(f.a, "", nil)
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "a call before the stall")
	f.srv.Pause()
	start := time.Now()
	r := s.Call(t, "echo", map[string]any{"text": "during"})
	took := time.Since(start)
	f.srv.Resume()
	typ, detail := denialData(r)
	if typ != string(gate.StoreUnavailable) {
		t.Fatalf("a call during the stall: %+v, want store_unavailable", r)
	}
	t.Logf("denied after %v: %s", took, detail)
	if took > 8*time.Second {
		t.Errorf("the denial took %v", took)
	}
	mcptest.Eventually(t, "a call allowed after SIGCONT", func() bool {
		r := s.Call(t, "echo", map[string]any{"text": "after"})
		return r.Err == nil && !r.Res.IsError
	})
}

// A revocation made through one proxy (delegateos revoke against the
// Redis list) is enforced by the others within a second.
func TestE2EFleetRevocationWithinASecond(t *testing.T) {
	fleetRevocationWithinASecond(t, newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost))
}

// The same on a Redis Cluster: the list is on one primary, and the
// announcement reaches proxies subscribed through any node.
func TestE2EFleetClusterRevocationWithinASecond(t *testing.T) {
	c := redistest.StartCluster(t)
	fleetRevocationWithinASecond(t, newFleetOn(t, c.URL(), 1000*fleetCost, 1000*fleetCost, 1000*fleetCost))
}

func fleetRevocationWithinASecond(t *testing.T, f *fleet) {
	var sessions []*mcptest.Session
	for range 3 {
		_, s := f.start(f.b, "", nil)
		s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "a call before the revoke")
		sessions = append(sessions, s)
	}
	keyFile := f.e.KeyFile(f.e.Root)
	revID := f.b.RevocationIDs()[1]
	start := time.Now()
	out, err := exec.Command(mcptest.Delegateos(t), "revoke", "--key", keyFile, "--list", f.url, "--id", revID).CombinedOutput()
	if err != nil {
		t.Fatalf("delegateos revoke: %v\n%s", err, out)
	}
	revoked := time.Since(start)
	var wg sync.WaitGroup
	lat := make([]time.Duration, len(sessions))
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				// The moment a call starts bounds when the proxy
				// enforced the revoke from above, whatever its round
				// trip costs.
				called := time.Since(start)
				r := s.Call(t, "echo", map[string]any{"text": "after"})
				typ, _ := denialData(r)
				if typ == string(dct.Revoked) {
					lat[i] = called
					return
				}
				// What holds however loaded the machine: a call begun
				// more than redisset.StaleAfter (a second) after the
				// revoke returned is never allowed; a proxy that has
				// not heard from Redis since refuses it
				// (store_unavailable). How soon the push arrives is
				// measured, not asserted: a bound on it holds only on
				// a machine with time to spare.
				allowed := r.Err == nil && r.RPC == nil && r.Res != nil && !r.Res.IsError
				if allowed && called-revoked > redisset.StaleAfter {
					t.Errorf("proxy %d allowed a call begun %v after the revoke returned", i, called-revoked)
					return
				}
				if time.Since(start) > mcptest.CallTimeout {
					t.Errorf("proxy %d still allows the revoked token after %v", i, mcptest.CallTimeout)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("delegateos revoke returned after %v; denied at the proxies after %v", revoked, lat)
}
