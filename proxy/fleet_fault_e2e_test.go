//go:build unix

package proxy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
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
	// Where CONFIG cannot be read (a managed Redis that disables it; here a
	// user without it), the proxy starts and warns that neither can be
	// verified.
	if err := f.srv.Client().Do(ctx, "ACL", "SETUSER", "gate", "on", ">pw", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	pol := f.policy("")
	pol.SpendStore = strings.Replace(f.srv.URL(), "redis://", "redis://gate:pw@", 1)
	p3 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	p3.Connect(mcptest.SessionOptions{}).Call(t, "echo", map[string]any{"text": "y"}).OK(t, "a call on a store whose CONFIG cannot be read")
	mcptest.Eventually(t, "the warning that CONFIG cannot be read", func() bool {
		log := p3.Log()
		return strings.Contains(log, `"level":"warn"`) && strings.Contains(log, "the eviction policy and persistence cannot be verified (CONFIG GET: NOPERM") &&
			strings.Contains(log, "make sure maxmemory-policy is noeviction")
	})
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
	if typ, detail := denialData(r); typ != string(gate.StoreUnavailable) || !strings.Contains(detail, "OOM") {
		t.Fatalf("a call while Redis is out of memory: %+v (%s: %s), want store_unavailable naming OOM", r, typ, detail)
	}
	c.ConfigSet(ctx, "maxmemory", "0")
	s.Call(t, "echo", map[string]any{"text": "after"}).OK(t, "a call once Redis has memory again")
	if err := c.HSet(ctx, "delegateos:spend:{"+f.e.Root.ID()+"}:"+f.key(1), "c", "lots").Err(); err != nil {
		t.Fatal(err)
	}
	r = s.Call(t, "echo", map[string]any{"text": "corrupted"})
	if typ, detail := denialData(r); typ != string(gate.StoreUnavailable) || typ == string(dct.BudgetExceeded) {
		t.Fatalf("a call on a corrupted field: %+v (%s: %s), want store_unavailable", r, typ, detail)
	}
}

// faultRun is a burst of calls by a fleet of proxies with a fault made
// midway.
type faultRun struct {
	forwarded  atomic.Int64
	afterTypes sync.Map // denial type -> count, of calls started once the fault was made
	types      sync.Map // denial type -> count, of every call
}

// burst runs, on each session, workers goroutines making calls calls
// each, and fault once after calls have been forwarded in all.
func (f *fleet) burst(sessions []*mcptest.Session, workers, calls int, after int64, fault func()) *faultRun {
	t := f.t
	t.Helper()
	run := &faultRun{}
	var made atomic.Bool
	trigger := make(chan struct{})
	var once sync.Once
	faultDone := make(chan struct{})
	go func() {
		<-trigger
		fault()
		made.Store(true)
		close(faultDone)
	}()
	var wg sync.WaitGroup
	for i, s := range sessions {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range calls {
					started := made.Load()
					r := s.Call(t, "echo", map[string]any{"text": fmt.Sprintf("%d-%d-%d", i, w, j)})
					if r.Err == nil && !r.Res.IsError {
						if run.forwarded.Add(1) >= after {
							once.Do(func() { close(trigger) })
						}
						if started {
							t.Errorf("proxy %d: a call made after the fault was forwarded", i)
						}
						continue
					}
					typ, detail := denialData(r)
					if typ == "" {
						t.Errorf("proxy %d: %+v is not a denial", i, r)
						continue
					}
					if typ == string(gate.StoreReset) && !strings.Contains(detail, "delegateos store recover") {
						t.Errorf("a store_reset denial does not say what to run: %s", detail)
					}
					count(&run.types, typ)
					if started {
						count(&run.afterTypes, typ)
					}
				}
			}()
		}
	}
	wg.Wait()
	once.Do(func() { close(trigger) })
	<-faultDone
	return run
}

func count(m *sync.Map, typ string) {
	v, _ := m.LoadOrStore(typ, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func counts(m *sync.Map) map[string]int64 {
	out := map[string]int64{}
	m.Range(func(k, v any) bool { out[k.(string)] = v.(*atomic.Int64).Load(); return true })
	return out
}

// upstreamCalls counts the echo calls the proxies' upstreams served, from
// their own log lines.
func upstreamCalls(ps []*mcptest.Process) int64 {
	var n int64
	for _, p := range ps {
		n += int64(len(p.LogWith("upstream stderr", func(m map[string]any) bool {
			line, _ := m["line"].(string)
			return strings.Contains(line, "tools/call tool=echo") && strings.Contains(line, "outcome=ok")
		})))
	}
	return n
}

// sameAsUpstreams waits for the upstreams' log lines (the proxies relay
// them as they come) to count the calls the clients saw forwarded.
func (f *fleet) sameAsUpstreams(ps []*mcptest.Process, forwarded int64) {
	f.t.Helper()
	mcptest.Eventually(f.t, fmt.Sprintf("the upstreams' logs to count the %d calls forwarded", forwarded), func() bool {
		up := upstreamCalls(ps)
		if up > forwarded {
			f.t.Fatalf("the upstreams served %d calls, the clients saw %d allowed", up, forwarded)
		}
		return up == forwarded
	})
}

// faultFleet starts three proxies, on tokens A, B and C of one tree.
func (f *fleet) faultFleet() ([]*mcptest.Process, []*mcptest.Session) {
	var ps []*mcptest.Process
	var ss []*mcptest.Session
	for _, tok := range []*dct.Token{f.a, f.b, f.c} {
		p, s := f.start(tok, "", nil)
		ps = append(ps, p)
		ss = append(ss, s)
	}
	return ps, ss
}

// checkReset checks a fault that loses data: no call made after it was
// forwarded and each was refused store_reset (or store_unavailable while
// Redis was down); no more calls than the budget were forwarded, as the
// upstreams count them; delegateos spend says the store lost data; and a
// proxy started now, on a machine that never saw the store, refuses too.
func (f *fleet) checkReset(ps []*mcptest.Process, ss []*mcptest.Session, run *faultRun, budgetCalls int64, also ...string) {
	t := f.t
	t.Helper()
	// Every proxy comes to refuse store_reset (after store_unavailable
	// while Redis is down), never forwarding.
	for i, s := range ss {
		mcptest.Eventually(t, fmt.Sprintf("proxy %d refusing store_reset", i), func() bool {
			r := s.Call(t, "echo", map[string]any{"text": "after"})
			if r.Err == nil && !r.Res.IsError {
				t.Fatalf("proxy %d forwarded a call after the fault", i)
			}
			typ, _ := denialData(r)
			count(&run.types, typ)
			count(&run.afterTypes, typ)
			return typ == string(gate.StoreReset)
		})
	}
	fwd := run.forwarded.Load()
	t.Logf("forwarded %d (budget %d); denials %v, after the fault %v", fwd, budgetCalls, counts(&run.types), counts(&run.afterTypes))
	if fwd > budgetCalls {
		t.Errorf("%d calls forwarded on a budget of %d", fwd, budgetCalls)
	}
	f.sameAsUpstreams(ps, fwd)
	after := counts(&run.afterTypes)
	if after[string(gate.StoreReset)] == 0 {
		t.Errorf("no call made after the fault was refused store_reset: %v", after)
	}
	for typ := range after {
		if typ != string(gate.StoreReset) && !slices.Contains(also, typ) {
			t.Errorf("calls made after the fault refused %s: %v", typ, after)
		}
	}
	out, errs, code := mcptest.CLI(t, "spend", "--store", f.srv.URL())
	if code == 0 || !strings.Contains(errs, "has lost data") || !strings.Contains(errs, "delegateos store recover") {
		t.Errorf("delegateos spend on the reset store: exit %d, %s%s; want it to say the store lost data and what to run", code, out, errs)
	}
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	r := p.Connect(mcptest.SessionOptions{}).Call(t, "echo", map[string]any{"text": "new proxy"})
	if typ, detail := denialData(r); typ != string(gate.StoreReset) {
		t.Errorf("a proxy started after the fault, on another machine: %+v (%s: %s), want store_reset", r, typ, detail)
	}
}

// FLUSHALL mid-burst: the proxies find their trees' stamps gone and refuse
// every call store_reset, instead of spending the budget again from zero.
func TestE2EFaultFlushAll(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 60*fleetCost, 30*fleetCost)
	ps, ss := f.faultFleet()
	run := f.burst(ss, 4, 20, 40, func() {
		if err := f.srv.Client().FlushAll(context.Background()).Err(); err != nil {
			t.Error(err)
		}
	})
	f.checkReset(ps, ss, run, 100)
}

// Redis restarted without persistence mid-burst: the same as a FLUSHALL,
// but for the calls refused store_unavailable while it was down.
func TestE2EFaultRestartWithoutPersistence(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 60*fleetCost, 30*fleetCost)
	ps, ss := f.faultFleet()
	run := f.burst(ss, 4, 20, 40, func() { f.srv.RestartEmpty() })
	f.checkReset(ps, ss, run, 100, string(gate.StoreUnavailable))
}

// Every key of one delegation tree deleted (DEL, or evicted) mid-burst.
func TestE2EFaultDelTreeKeys(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 60*fleetCost, 30*fleetCost)
	ps, ss := f.faultFleet()
	run := f.burst(ss, 4, 20, 40, func() {
		ctx := context.Background()
		c := f.srv.Client()
		keys, err := c.Keys(ctx, "delegateos:*{"+f.e.Root.ID()+"}*").Result()
		if err != nil || len(keys) == 0 {
			t.Errorf("the tree's keys: %v %v", keys, err)
		}
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Error(err)
		}
	})
	f.checkReset(ps, ss, run, 100)
	// The operator accepts the loss: the proxies carry on, without a
	// restart.
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset"); code != 0 || !strings.Contains(out, "generation") {
		t.Fatalf("store init --reset: exit %d, %s%s", code, out, errs)
	}
	for i, s := range ss {
		s.Call(t, "echo", map[string]any{"text": "accepted"}).OK(t, fmt.Sprintf("proxy %d's call once the loss is accepted", i))
	}
	if _, errs, code := mcptest.CLI(t, "spend", "--store", f.srv.URL()); code != 0 {
		t.Errorf("spend after store init --reset: exit %d, %s", code, errs)
	}
}

// A stall (SIGSTOP) in which the proxies exit: the calls refused
// store_unavailable during it sent reservations that Redis runs when it
// wakes, after their proxies are gone. Their cancellations, which could
// not be sent, were journalled in the proxies' state directory, and the
// next proxy started there sends them: nothing refused stays charged.
func TestE2EFaultStallWithProxiesExiting(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 60*fleetCost, 30*fleetCost)
	// Long enough that a slow fsync on a loaded machine is not taken for
	// the stall.
	f.timeouts = "?read_timeout=2s&write_timeout=2s"
	pol := f.policy("")
	pol.RevocationList = "" // every call then sends its reservation to Redis
	var ps []*mcptest.Process
	var ss []*mcptest.Session
	for _, tok := range []*dct.Token{f.a, f.b, f.c} {
		p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
		ps = append(ps, p)
		ss = append(ss, p.Connect(mcptest.SessionOptions{}))
	}
	var forwarded int64
	for i, s := range ss {
		for j := range 3 {
			s.Call(t, "echo", map[string]any{"text": fmt.Sprintf("%d-%d", i, j)}).OK(t, "a call before the stall")
			forwarded++
		}
	}
	mcptest.Eventually(t, "the calls before the stall settled", func() bool { return f.usage()[f.key(1)].Reserved == 0 })
	f.srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			f.srv.Resume()
		}
	}()
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.Call(t, "echo", map[string]any{"text": fmt.Sprintf("stalled %d", i)})
			if typ, detail := denialData(r); typ != string(gate.StoreUnavailable) {
				t.Errorf("a call during the stall: %+v (%s: %s), want store_unavailable", r, typ, detail)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, p := range ps {
		p.Stdin.Close()
	}
	for _, p := range ps {
		if !p.WaitExit(mcptest.WaitTimeout) {
			t.Fatal("a proxy did not exit during the stall")
		}
	}
	f.srv.Resume()
	resumed = true
	// The next proxy started on this machine sends what the others could
	// not: every refused call's reservation is released.
	_, s := f.start(f.a, "", nil)
	mcptest.Eventually(t, "the stalled calls' reservations released", func() bool {
		u := f.usage()
		for n := 1; n <= 3; n++ {
			if u[f.key(n)].Reserved != 0 {
				return false
			}
		}
		return true
	})
	want := map[int]int64{1: forwarded, 2: 6, 3: 3}
	for n, calls := range want {
		if got := f.usage()[f.key(n)]; got.Committed != calls*fleetCost {
			t.Errorf("%s: committed %d, want the %d calls forwarded under it", f.key(n), got.Committed, calls)
		}
	}
	s.Call(t, "echo", map[string]any{"text": "after"}).OK(t, "a call after the stall")
	out, errs, code := mcptest.CLI(t, "spend", "--store", f.srv.URL(), "--json")
	if code != 0 || !strings.Contains(out, fmt.Sprintf(`"committed": %d`, (forwarded+1)*fleetCost)) {
		t.Errorf("spend after the stall: exit %d, %s%s", code, out, errs)
	}
}

// FLUSHALL mid-burst, then delegateos store recover from the three
// proxies' signed audit logs: the rebuilt spend at every level is what
// the upstreams served under it, the proxies take calls again without a
// restart, and the budget holds across the reset.
func TestE2EFaultFlushAllRecover(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 60*fleetCost, 30*fleetCost)
	var ps []*mcptest.Process
	var ss []*mcptest.Session
	var logs []string
	for i, tok := range []*dct.Token{f.a, f.b, f.c} {
		key := mcptest.NewKey(t, fmt.Sprintf("proxy%d", i))
		log := filepath.Join(f.e.Dir, fmt.Sprintf("audit-%d.log", i))
		logs = append(logs, log)
		p, s := f.start(tok, "proxy_key: "+f.e.KeyFile(key)+"\naudit_log: "+log+"\n", nil)
		ps = append(ps, p)
		ss = append(ss, s)
	}
	run := f.burst(ss, 4, 10, 40, func() {
		if err := f.srv.Client().FlushAll(context.Background()).Err(); err != nil {
			t.Error(err)
		}
	})
	f.checkReset(ps, ss, run, 100)
	args := []string{"store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID()}
	for _, l := range logs {
		args = append(args, "--audit", l)
	}
	out, errs, code := mcptest.CLI(t, args...)
	if code != 0 || !strings.Contains(out, "rebuilt the spend of 3 delegations") {
		t.Fatalf("store recover: exit %d, %s%s", code, out, errs)
	}
	t.Logf("store recover: %s", out)
	served := []int64{upstreamCalls(ps[:1]), upstreamCalls(ps[1:2]), upstreamCalls(ps[2:])}
	u := f.usage()
	for n, want := range []int64{served[0] + served[1] + served[2], served[1] + served[2], served[2]} {
		got := u[f.key(n+1)]
		if got.Committed+got.Reserved != want*fleetCost {
			t.Errorf("%s rebuilt as %d committed, %d reserved; the upstreams served %d calls under it (%d)", f.key(n+1), got.Committed, got.Reserved, want, want*fleetCost)
		}
	}
	// The proxies take calls again, and the root's budget holds across
	// the reset: 100 calls in all.
	var after int64
	for i, s := range ss {
		for {
			r := s.Call(t, "echo", map[string]any{"text": "after recovery"})
			if r.Err == nil && !r.Res.IsError {
				after++
				continue
			}
			if typ, detail := denialData(r); typ != string(dct.BudgetExceeded) {
				t.Fatalf("proxy %d after the recovery: %s: %s, want allowed or budget_exceeded", i, typ, detail)
			}
			break
		}
	}
	total := run.forwarded.Load() + after
	f.sameAsUpstreams(ps, total)
	if total > 100 {
		t.Errorf("forwarded %d before and %d after the recovery; the root's budget is 100", run.forwarded.Load(), after)
	}
	if _, errs, code := mcptest.CLI(t, "spend", "--store", f.srv.URL()); code != 0 {
		t.Errorf("spend after the recovery: exit %d, %s", code, errs)
	}
}

// A tree's keys moved back to an earlier state, as a failover to a
// replica that had not caught up leaves them: the keys are dumped early
// in the run and restored midway through a burst. The proxies have seen
// the tree count more reservations than its stamp now does, and refuse
// store_reset.
func TestE2EFaultTreeRolledBack(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 60*fleetCost, 30*fleetCost)
	ps, ss := f.faultFleet()
	for i, s := range ss {
		s.Call(t, "echo", map[string]any{"text": fmt.Sprint(i)}).OK(t, "a call before the snapshot")
	}
	mcptest.Eventually(t, "the first calls settled", func() bool { return f.usage()[f.key(1)].Reserved == 0 })
	ctx := context.Background()
	c := f.srv.Client()
	keys, err := c.Keys(ctx, "delegateos:*{"+f.e.Root.ID()+"}*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the tree's keys: %v %v", keys, err)
	}
	dumps := map[string]string{}
	for _, k := range keys {
		if dumps[k], err = c.Dump(ctx, k).Result(); err != nil {
			t.Fatal(err)
		}
	}
	run := f.burst(ss, 4, 20, 40, func() {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for k, d := range dumps {
				p.RestoreReplace(ctx, k, 0, d)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	run.forwarded.Add(3)
	f.checkReset(ps, ss, run, 100)
}

// After a FLUSHALL, a proxy on a machine that never saw the store takes
// it for a new one (nothing it can read says otherwise) and forwards
// calls; as soon as a proxy that saw the store makes a call, the tree is
// marked, and the new proxy refuses store_reset too.
func TestE2EFaultFlushAllNewProxyFirst(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 60*fleetCost, 30*fleetCost)
	_, old := f.start(f.a, "", nil)
	for i := range 3 {
		old.Call(t, "echo", map[string]any{"text": fmt.Sprint(i)}).OK(t, "a call before the flush")
	}
	f.srv.FlushAll()
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	fresh := p.Connect(mcptest.SessionOptions{})
	fresh.Call(t, "echo", map[string]any{"text": "new machine"}).OK(t, "the new proxy's first call, on what it takes for a new store")
	r := old.Call(t, "echo", map[string]any{"text": "old"})
	if typ, detail := denialData(r); typ != string(gate.StoreReset) {
		t.Fatalf("the old proxy after the flush: %+v (%s: %s), want store_reset", r, typ, detail)
	}
	r = fresh.Call(t, "echo", map[string]any{"text": "new machine again"})
	if typ, detail := denialData(r); typ != string(gate.StoreReset) {
		t.Fatalf("the new proxy once the old one found the loss: %+v (%s: %s), want store_reset", r, typ, detail)
	}
	if _, errs, code := mcptest.CLI(t, "spend", "--store", f.srv.URL()); code == 0 || !strings.Contains(errs, "has lost data") {
		t.Errorf("spend: exit %d, %s; want it to say the store lost data", code, errs)
	}
}

// The rate-limit windows are rebuilt too, with the policy: after a
// FLUSHALL and store recover --policy, a delegation that had used its 5
// calls an hour is refused rate_limited, not given 5 more.
func TestE2EFaultFlushAllRecoverRateWindows(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 60*fleetCost, 30*fleetCost)
	key := mcptest.NewKey(t, "proxy")
	log := filepath.Join(f.e.Dir, "audit.log")
	pol := f.policy("rate: 5/1h\nproxy_key: " + f.e.KeyFile(key) + "\naudit_log: " + log + "\n")
	polFile := filepath.Join(f.e.Dir, "fleet-policy.yaml")
	mcptest.WriteFile(t, polFile, pol.YAML())
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.b})
	s := p.Connect(mcptest.SessionOptions{})
	for i := range 5 {
		s.Call(t, "echo", map[string]any{"text": fmt.Sprint(i)}).OK(t, "a call within the rate")
	}
	if typ, _ := denialData(s.Call(t, "echo", map[string]any{"text": "sixth"})); typ != string(gate.RateLimited) {
		t.Fatalf("the sixth call in the hour: %s, want rate_limited", typ)
	}
	f.srv.FlushAll()
	if typ, _ := denialData(s.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(gate.StoreReset) {
		t.Fatalf("a call after the flush: %s, want store_reset", typ)
	}
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log, "--policy", polFile)
	if code != 0 || !strings.Contains(out, "rebuilt 2 rate-limit windows") {
		t.Fatalf("store recover --policy: exit %d, %s%s", code, out, errs)
	}
	r := s.Call(t, "echo", map[string]any{"text": "after the recovery"})
	if typ, detail := denialData(r); typ != string(gate.RateLimited) {
		t.Fatalf("a call after the recovery: %+v (%s: %s), want rate_limited (the hour's 5 calls rebuilt)", r, typ, detail)
	}
	if u := f.usage()[f.key(2)]; u.Committed != 5*fleetCost {
		t.Errorf("B's spend rebuilt as %+v, want its 5 calls", u)
	}
}
