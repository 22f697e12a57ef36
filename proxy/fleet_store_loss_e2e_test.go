//go:build linux

package proxy_test

// A fleet's store losing data (issue 19): losses the store's checks
// missed when the red team of the store history found them (RTn), each
// through the real binaries on a real redis-server; they failed before
// the fixes (wt-storefix) and pass now. Shared setup:
// fleet_store_e2e_test.go.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// RT1. Generation moved backwards under running proxies: the store is
// rolled back to a snapshot taken before an operator's store init
// --reset (generation G1 < G2). The running proxy knows G2; the
// reservation script skips the stamp's count check when the stamp's
// generation is below the proxy's, and raises the stamp to G2: the calls
// spent since the snapshot are spent again.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamGenerationRollbackUnderRunningProxy).
func TestE2EFaultGenerationRollbackUnderRunningProxy(t *testing.T) {
	f := newStoreFleet(t)
	p, s := f.start(f.a, "", nil)
	n, _, _ := drain(t, s, 10)
	f.settled()
	snap := f.snapshot() // identity G1, 10 calls spent
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset"); code != 0 {
		t.Fatalf("store init --reset: exit %d, %s%s", code, out, errs)
	}
	m, typ, _ := drain(t, s, 40)
	if typ != string(dct.BudgetExceeded) {
		t.Fatalf("the budget after %d+%d calls: %s, want budget_exceeded", n, m, typ)
	}
	f.settled()
	f.restore(snap)
	more, typ, detail := drain(t, s, 40)
	total := n + m + more
	f.sameAsUpstreams([]*mcptest.Process{p}, total)
	if more > 0 || typ != string(gate.StoreReset) {
		t.Errorf("after the store went back to generation G1 (the proxy knows G2): %d more calls forwarded (%d on a budget of 30), then %s: %s; want store_reset at once", more, total, typ, detail)
	}
}

// RT3. The loss is found, but not by a call on the tree: after a
// FLUSHALL a proxy with a new state directory takes the store for new
// and forwards (README's known window); then a proxy of the old machine
// restarts, finds the loss at join and marks delegateos:store reset, and
// delegateos spend says the store lost data. The README says that from
// then on every proxy refuses store_reset; the new proxy goes on
// forwarding, past the budget, because only a tree's stamp is checked by
// its reservations, and join marks no stamp (the old proxy's calls are
// refused before its script runs).
// Found by the red team of issue 19's store history, fixed (was TestRedTeamResetFoundAtJoinNotSeenByNewProxy).
func TestE2EFaultResetFoundAtJoinSeenByNewProxy(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 20)
	f.settled()
	stopProxy(t, p1)
	f.srv.FlushAll()
	pn := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	sn := pn.Connect(mcptest.SessionOptions{})
	sn.Call(t, "echo", map[string]any{"text": "new machine"}).OK(t, "the new proxy's first call (the README's known window)")
	// The old machine's proxy restarts and finds the loss.
	p2, s2 := f.start(f.a, "", nil)
	if r := s2.Call(t, "echo", map[string]any{"text": "old machine"}); func() bool { typ, _ := denialData(r); return typ != string(gate.StoreReset) }() {
		t.Fatalf("the old machine's proxy after the flush: %+v, want store_reset", r)
	}
	if _, errs, code := mcptest.CLI(t, "spend", "--store", f.srv.URL()); code == 0 || !strings.Contains(errs, "has lost data") {
		t.Fatalf("spend: exit %d, %s; want it to say the store lost data", code, errs)
	}
	more, typ, detail := drain(t, sn, 40)
	total := n + 1 + more
	f.sameAsUpstreams([]*mcptest.Process{p1, pn, p2}, total)
	if more > 0 {
		t.Errorf("once the loss was found and marked in the store, the new proxy forwarded %d more calls (%d on a budget of 30), then %s: %s; want store_reset", more, total, typ, detail)
	}
}

// RT4. Only a tree's spend keys deleted (a README fault row) while a
// call is in flight: the call's commit recreates the keys with h = -cost
// (HINCRBY on a missing key), which no script accepts. Every later call
// of the tree is refused store_unavailable, not store_reset; delegateos
// spend fails; store recover fails on the negative field and store init
// --reset leaves it: only deleting keys by hand mends the tree.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamSpendKeysDeletedWithCallInFlight).
func TestE2EFaultSpendKeysDeletedWithCallInFlight(t *testing.T) {
	f := newStoreFleet(t)
	key := mcptest.NewKey(t, "proxy")
	log := filepath.Join(f.e.Dir, "audit.log")
	_, s := f.start(f.a, "proxy_key: "+f.e.KeyFile(key)+"\naudit_log: "+log+"\n", nil)
	drain(t, s, 3)
	f.settled()
	done := make(chan mcptest.Result, 1)
	go func() { done <- s.Call(t, "slow", map[string]any{"steps": 20, "delay_ms": 100}) }()
	mcptest.Eventually(t, "the slow call's reservation", func() bool { return f.usage()[f.key(1)].Reserved == fleetCost })
	ctx := context.Background()
	c := f.srv.Client()
	keys, err := c.Keys(ctx, "delegateos:spend:{"+f.e.Root.ID()+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the tree's spend keys: %v %v", keys, err)
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	(<-done).OK(t, "the slow call")
	r := s.Call(t, "echo", map[string]any{"text": "after"})
	if typ, detail := denialData(r); typ != string(gate.StoreReset) {
		t.Errorf("a call after the tree's spend keys were deleted: %s: %s; want store_reset", typ, detail)
	}
	if out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log); code != 0 {
		t.Errorf("store recover: exit %d, %s%s; want the spend rebuilt", code, out, errs)
	}
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset"); code != 0 {
		t.Errorf("store init --reset: exit %d, %s%s", code, out, errs)
	}
	r = s.Call(t, "echo", map[string]any{"text": "after the operator acted"})
	if typ, detail := denialData(r); typ != "" {
		t.Errorf("a call after store recover and store init --reset: %s: %s; want it forwarded", typ, detail)
	}
}

// RT6. Two delegation trees (two roots: two fleets, or one fleet with two
// trusted roots) on one Redis lose their data in a FLUSHALL. store
// recover --root R1 rebuilds R1's spend, as the README says (one root at
// a time), but the new generation it writes is store-wide: the proxies of
// R2 adopt it, forget what they saw, and take R2's empty tree for a new
// one. R2's budget is spent again. (store init --reset by the operator of
// the other fleet on a shared Redis does the same.)
// Found by the red team of issue 19's store history, fixed (was TestRedTeamRecoverOneRootLiftsResetOfAnother).
func TestE2EFaultRecoverOneRootKeepsResetOfAnother(t *testing.T) {
	f1 := newStoreFleet(t)
	f2 := f1.otherRoot()
	log1 := filepath.Join(f1.e.Dir, "audit-1.log")
	_, s1 := f1.start(f1.a, f1.audited("p1", log1), nil)
	log2 := filepath.Join(f2.e.Dir, "audit-2.log")
	p2, s2 := f2.start(f2.a, f2.audited("p2", log2), nil)
	n1, _, _ := drain(t, s1, 20)
	n2, _, _ := drain(t, s2, 20)
	f1.settled()
	f2.settled()
	f1.srv.FlushAll()
	for i, s := range []*mcptest.Session{s1, s2} {
		if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(gate.StoreReset) {
			t.Fatalf("tree %d after the flush: %s: %s, want store_reset", i+1, typ, detail)
		}
	}
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f1.srv.URL(), "--root", f1.e.Root.ID(), "--audit", log1)
	if code != 0 {
		t.Fatalf("store recover --root R1: exit %d, %s%s", code, out, errs)
	}
	if m, typ, _ := drain(t, s1, 20); n1+m > 30 || typ != string(dct.BudgetExceeded) {
		t.Fatalf("tree 1 after its recovery: %d+%d forwarded, then %s", n1, m, typ)
	}
	more, typ, detail := drain(t, s2, 40)
	f2.sameAsUpstreams([]*mcptest.Process{p2}, n2+more)
	if more > 0 {
		t.Errorf("tree 2, whose spend no one rebuilt, after store recover --root R1: %d more calls forwarded (%d on a budget of 30), then %s: %s; want store_reset until its own recovery", more, n2+more, typ, detail)
	}
	if _, errs, code := mcptest.CLI(t, "spend", "--store", f1.srv.URL()); code == 0 || !strings.Contains(errs, "{"+f2.e.Root.ID()+"} are still marked lost") {
		t.Errorf("spend with tree 2 still lost: exit %d, %s; want it to name the tree", code, errs)
	}
	// Its own recovery lifts it, though the store is no longer reset.
	out, errs, code = mcptest.CLI(t, "store", "recover", "--store", f1.srv.URL(), "--root", f2.e.Root.ID(), "--audit", log2)
	if code != 0 {
		t.Fatalf("store recover --root R2: exit %d, %s%s", code, out, errs)
	}
	if m, typ, detail := drain(t, s2, 20); n2+m > 30 || typ != string(dct.BudgetExceeded) {
		t.Fatalf("tree 2 after its recovery: %d+%d forwarded, then %s: %s", n2, m, typ, detail)
	}
}

// RT9. store init --reset on a healthy store while three proxies of one
// machine (one state directory) spend a budget: the budget holds, but the
// proxies adopt the new generation at once and each writes the identity
// file through the same temporary name (STATE/redis-HASH.json.tmp), so
// one's rename fails and its call is refused store_unavailable ("rename
// ... no such file or directory") though Redis is fine. (A race: it shows
// in most runs on a loaded machine; the same race can rename a torn,
// empty file into place, and a proxy then refuses to start.)
// Found by the red team of issue 19's store history, fixed (was TestRedTeamInitResetMidBurstSharedStateDir).
func TestE2EFaultInitResetMidBurstSharedStateDir(t *testing.T) {
	f := newFleet(t, 60*fleetCost, 60*fleetCost, 60*fleetCost)
	_, ss := f.faultFleet()
	var forwarded atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	initDone := make(chan struct{})
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 60; j++ {
				r := s.Call(t, "echo", map[string]any{"text": fmt.Sprint(i, j)})
				if r.Err == nil && !r.Res.IsError {
					if forwarded.Add(1) == 15 {
						once.Do(func() {
							go func() {
								defer close(initDone)
								if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset"); code != 0 {
									t.Errorf("store init --reset: exit %d, %s%s", code, out, errs)
								}
							}()
						})
					}
					continue
				}
				typ, detail := denialData(r)
				switch typ {
				case string(dct.BudgetExceeded):
					return
				case string(gate.StoreReset): // while the generation changes hands
				default:
					t.Errorf("proxy %d: %s: %s", i, typ, detail)
					return
				}
			}
		}()
	}
	wg.Wait()
	<-initDone
	f.settled()
	if n := forwarded.Load(); n > 60 {
		t.Errorf("%d calls forwarded on a budget of 60 across store init --reset", n)
	}
	if got := f.usage()[f.key(1)].Committed; got != forwarded.Load()*fleetCost {
		t.Errorf("committed %d for %d calls forwarded", got, forwarded.Load())
	}
}

// RT10. store recover run while the fleet spends (a store that is not
// reset: an operator's mistake, or a loss at one tree only): RecoverStore
// read a key's c and h, then wrote c in another round trip; a commit
// that landed between them was overwritten, and the budget was charged
// less than was forwarded. (A race: the recoveries are repeated during
// the burst to hit it.) Now store recover refuses a store that is not
// reset, and rebuilds each key in one script.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamRecoverDuringBurstLosesCommits).
func TestE2EFaultRecoverDuringBurstRefused(t *testing.T) {
	f := newFleet(t, 150*fleetCost, 150*fleetCost, 150*fleetCost)
	var logs []string
	var ss []*mcptest.Session
	for i, tok := range []*dct.Token{f.a, f.b, f.c} {
		log := filepath.Join(f.e.Dir, fmt.Sprintf("audit-%d.log", i))
		logs = append(logs, log)
		_, s := f.start(tok, "proxy_key: "+f.e.KeyFile(mcptest.NewKey(t, fmt.Sprint("p", i)))+"\naudit_log: "+log+"\n", nil)
		ss = append(ss, s)
	}
	var forwarded atomic.Int64
	var wg sync.WaitGroup
	stopRecover := make(chan struct{})
	recovered := make(chan int)
	go func() {
		n := 0
		defer func() { recovered <- n }()
		args := []string{"store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID()}
		for _, l := range logs {
			args = append(args, "--audit", l)
		}
		for {
			select {
			case <-stopRecover:
				return
			default:
			}
			// A store in use, not reset, is refused: that the rebuild
			// cannot race the proxies' commits is what is tested. (A log
			// read while its proxy writes may end in half an entry, which
			// the recovery refuses first: a refusal too.)
			out, errs, code := mcptest.CLI(t, args...)
			if code != 0 && !strings.Contains(errs, "is not in the reset state") && !strings.Contains(errs, "is not a whole entry (no newline)") {
				t.Errorf("store recover: exit %d, %s%s", code, out, errs)
				return
			}
			if code == 0 {
				n++
			}
		}
	}()
	for i, s := range ss {
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 60; j++ {
					r := s.Call(t, "echo", map[string]any{"text": fmt.Sprint(i, w, j)})
					if r.Err == nil && !r.Res.IsError {
						forwarded.Add(1)
						continue
					}
					if typ, _ := denialData(r); typ == string(dct.BudgetExceeded) {
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(stopRecover)
	n := <-recovered
	f.settled()
	got := f.usage()[f.key(1)].Committed / fleetCost
	t.Logf("%d recoveries during the burst; %d calls forwarded, %d committed", n, forwarded.Load(), got)
	if got != forwarded.Load() {
		t.Errorf("%d calls forwarded, the root's spend records %d", forwarded.Load(), got)
	}
}

// RT12. A store moved to Redis with store migrate (or a Redis store
// written before this change, which an upgrade keeps): its spend keys have
// no "k:KEY" field in the tree's stamp, since the reservation script
// marks only keys it finds missing. Deleting them later (DEL, a README
// fault row) is taken for a new key: the budget restarts from zero. (A
// running proxy also checks the root delegation's count: the keys of
// the levels below it are deleted here.)
// Found by the red team of issue 19's store history, fixed (was TestRedTeamMigratedSpendKeysDeletedUnnoticed).
func TestE2EFaultMigratedSpendKeysDeletedFound(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 30*fleetCost, 30*fleetCost)
	file := filepath.Join(f.e.Dir, "spend.log")
	pol := f.e.Policy(mcptest.Priced("echo", fleetCost))
	pol.SpendStore = file
	p1 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.c})
	n, _, _ := drain(t, p1.Connect(mcptest.SessionOptions{}), 20)
	stopProxy(t, p1)
	if out, errs, code := mcptest.CLI(t, "store", "migrate", "--from", file, "--to", f.srv.URL()); code != 0 {
		t.Fatalf("store migrate: exit %d, %s%s", code, out, errs)
	}
	p2, s := f.start(f.c, "", nil)
	s.Call(t, "echo", map[string]any{"text": "on Redis"}).OK(t, "a call on the migrated store")
	f.settled()
	ctx := context.Background()
	c := f.srv.Client()
	keys, err := c.Keys(ctx, "delegateos:spend:{"+f.e.Root.ID()+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the tree's spend keys: %v %v", keys, err)
	}
	// The levels below the root only: the root delegation's count of
	// calls, which a running proxy checks, is left as it was.
	root := "delegateos:spend:{" + f.e.Root.ID() + "}:" + f.key(1)
	var below []string
	for _, k := range keys {
		if k != root {
			below = append(below, k)
		}
	}
	if len(below) != 2 {
		t.Fatalf("the spend keys below the root: %v", below)
	}
	c.Del(ctx, below...)
	more, typ, detail := drain(t, s, 40)
	f.sameAsUpstreams([]*mcptest.Process{p2}, 1+more)
	if more > 0 {
		t.Errorf("after the migrated tree's spend keys were deleted: %d more calls forwarded (%d on a budget of 30), then %s: %s; want store_reset", more, n+1+more, typ, detail)
	}
}

// RT13. store init without --reset ("give a Redis spend store its
// identity", the first-time setup a deploy script may run at every
// deploy) on a store a FLUSHALL emptied while its proxies were down: no
// stamp is left, so it writes a new identity "by operator"; the proxies,
// restarted on their machines, take a newer operator generation as an
// operator's decision (join, budget/identity.go:270) instead of the loss
// their state directory proves. The budget is spent again.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamPlainStoreInitAfterFlushAcceptsTheLoss).
func TestE2EFaultPlainStoreInitAfterFlushKeepsTheLoss(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 20)
	f.settled()
	stopProxy(t, p1)
	f.srv.FlushAll()
	out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL())
	t.Logf("store init (no --reset) after the flush: exit %d, %s%s", code, out, errs)
	p2, s2 := f.start(f.a, "", nil) // the same machine: it saw the store
	more, typ, detail := drain(t, s2, 40)
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, n+more)
	if more > 0 || typ != string(gate.StoreReset) {
		t.Errorf("after FLUSHALL and a plain store init, the restarted proxy forwarded %d more calls (%d on a budget of 30), then %s: %s; want store_reset until store recover or store init --reset", more, n+more, typ, detail)
	}
}

// RT2. Redis restarted from an older RDB snapshot while the proxies were
// restarted too (their state directories kept, as the README asks): the
// identity and generation are unchanged, and a restarted proxy has seen
// no tree's count, so nothing refuses. The budget is spent again.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamOldSnapshotAfterProxiesRestarted).
func TestE2EFaultOldSnapshotAfterProxiesRestarted(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, typ, _ := drain(t, s1, 40)
	if typ != string(dct.BudgetExceeded) {
		t.Fatalf("the budget: %s, want budget_exceeded", typ)
	}
	f.settled()
	stopProxy(t, p1)
	f.restore(snap)
	// The same machine (state directory), a new process.
	p2, s2 := f.start(f.a, "", nil)
	more, typ, detail := drain(t, s2, 40)
	total := n + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	if total > 30 {
		t.Errorf("Redis went back to a snapshot of %d calls after %d: a restarted proxy forwarded %d more (%d on a budget of 30), then %s: %s; want store_reset", n, n+m, more, total, typ, detail)
	}
}

// rdbRedis is a redis-server persisting by RDB snapshots only (Redis's
// default kind of persistence, which the proxy warns of but accepts).
type rdbRedis struct {
	t    *testing.T
	dir  string
	port int
	cmd  *exec.Cmd
}

func (r *rdbRedis) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

func (r *rdbRedis) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", filepath.Join(r.dir, "redis.log"))
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.port), MaxRetries: -1})
	defer c.Close()
	mcptest.Eventually(r.t, "redis-server to answer", func() bool { return c.Ping(context.Background()).Err() == nil })
}

func (r *rdbRedis) kill() {
	if r.cmd != nil && r.cmd.ProcessState == nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

// RT11. RT2 with a real restart: Redis persisting by RDB snapshots (the
// proxy warns, and starts) takes a snapshot, the fleet spends the rest of
// the budget, Redis is killed and restarts from its dump.rdb; the
// proxies restarted since (same machine, state directory kept) spend the
// budget again.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamRDBRestartAfterProxiesRestarted).
func TestE2EFaultRDBRestartAfterProxiesRestarted(t *testing.T) {
	f := newStoreFleet(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rdbRedis{t: t, dir: t.TempDir(), port: l.Addr().(*net.TCPAddr).Port}
	l.Close()
	r.start()
	t.Cleanup(r.kill)
	pol := f.e.Policy(mcptest.Priced("echo", fleetCost))
	pol.SpendStore = r.url()
	spent := func() int64 {
		us, err := budget.ReadUsage(r.url())
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			if u.Key == f.key(1) {
				return u.Committed + u.Reserved
			}
		}
		return 0
	}
	p1 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s1 := p1.Connect(mcptest.SessionOptions{})
	n, _, _ := drain(t, s1, 10)
	mcptest.Eventually(t, "the calls settled", func() bool { return spent() == n*fleetCost })
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.port)})
	if err := c.Save(context.Background()).Err(); err != nil { // the periodic snapshot
		t.Fatal(err)
	}
	c.Close()
	m, typ, _ := drain(t, s1, 40)
	if typ != string(dct.BudgetExceeded) {
		t.Fatalf("the budget: %s, want budget_exceeded", typ)
	}
	stopProxy(t, p1)
	r.kill()
	r.start() // from dump.rdb
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	more, typ, detail := drain(t, p2.Connect(mcptest.SessionOptions{}), 40)
	if n+m+more > 30 {
		t.Errorf("Redis restarted from its last RDB snapshot (%d calls) after %d: the restarted proxy forwarded %d more (%d on a budget of 30), then %s: %s; want store_reset", n, n+m, more, n+m+more, typ, detail)
	}
}

// RT5. A proxy killed (kill -9) during a stall, after it refused calls
// store_unavailable: Redis runs their reservations when it wakes, and
// nothing ever cancels them (the journal is written only by Close). The
// next proxy on the same machine finds no journal: calls that were
// refused stay charged for ever.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamStallThenKillLeavesRefusedCallsCharged).
func TestE2EFaultStallThenKillReleasesRefusedCalls(t *testing.T) {
	f := newFleet(t, 10*fleetCost, 10*fleetCost, 10*fleetCost)
	f.timeouts = "?read_timeout=300ms&write_timeout=300ms"
	pol := f.policy("")
	pol.RevocationList = ""
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a, WantExit: func(int) bool { return true }})
	s := p.Connect(mcptest.SessionOptions{})
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "a call before the stall")
	f.settled()
	f.srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			f.srv.Resume()
		}
	}()
	for j := range 2 {
		r := s.Call(t, "echo", map[string]any{"text": fmt.Sprint("stalled ", j)})
		if typ, detail := denialData(r); typ != string(gate.StoreUnavailable) {
			t.Fatalf("a call during the stall: %s: %s, want store_unavailable", typ, detail)
		}
	}
	pid := p.UpstreamPID()
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.WaitExit(mcptest.WaitTimeout)
	if pid > 0 {
		if pr, err := os.FindProcess(pid); err == nil {
			pr.Kill()
		}
		mcptest.Eventually(t, "the killed proxy's upstream gone", func() bool { return mcptest.ProcessGone(pid) })
	}
	f.srv.Resume()
	resumed = true
	// Redis reads what the killed proxy wrote before its connection
	// closed: at least one stalled reservation runs.
	mcptest.Eventually(t, "a stalled reservation to run", func() bool { return f.usage()[f.key(1)].Reserved > 0 })
	_, s2 := f.start(f.a, "", nil)
	s2.Call(t, "echo", map[string]any{"text": "after"}).OK(t, "a call after the stall")
	// s2 is on the killed proxy's machine (state directory); its
	// journal replay ran before it answered. Its own call committed:
	mcptest.Eventually(t, "the call after the stall committed", func() bool { return f.usage()[f.key(1)].Committed == 2*fleetCost })
	if u := f.usage()[f.key(1)]; u.Reserved != 0 {
		t.Errorf("calls refused store_unavailable during the stall stay reserved (%d) after the next proxy on the machine started: nothing releases them", u.Reserved)
	}
}

// RT7. A proxy killed while it replays a journal (after its claim, the
// rename to .sending-NONCE) leaves the claimed file, which no later proxy
// reads (the glob wants .json at the end): the refused calls it held stay
// charged. The claimed file is made here as such a crash leaves it.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamJournalClaimedByCrashedProxyIsLost).
func TestE2EFaultJournalClaimedByCrashedProxyReplayed(t *testing.T) {
	f := newFleet(t, 10*fleetCost, 10*fleetCost, 10*fleetCost)
	f.timeouts = "?read_timeout=300ms&write_timeout=300ms"
	pol := f.policy("")
	pol.RevocationList = ""
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s := p.Connect(mcptest.SessionOptions{})
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "a call before the stall")
	f.settled()
	f.srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			f.srv.Resume()
		}
	}()
	for j := range 2 {
		r := s.Call(t, "echo", map[string]any{"text": fmt.Sprint("stalled ", j)})
		if typ, detail := denialData(r); typ != string(gate.StoreUnavailable) {
			t.Fatalf("a call during the stall: %s: %s, want store_unavailable", typ, detail)
		}
	}
	stopProxy(t, p)
	f.srv.Resume()
	resumed = true
	mcptest.Eventually(t, "a stalled reservation to run", func() bool { return f.usage()[f.key(1)].Reserved > 0 })
	state := filepath.Join(f.e.Dir, "state")
	journals, _ := filepath.Glob(filepath.Join(state, "*.unsent-*.json"))
	if len(journals) != 1 {
		t.Fatalf("the stopped proxy's journal: %v", journals)
	}
	// A proxy claimed it and was killed before it sent it.
	if err := os.Rename(journals[0], journals[0]+".sending-0123456789abcdef01234567"); err != nil {
		t.Fatal(err)
	}
	_, s2 := f.start(f.a, "", nil)
	s2.Call(t, "echo", map[string]any{"text": "after"}).OK(t, "a call after the stall")
	mcptest.Eventually(t, "the call after the stall committed", func() bool { return f.usage()[f.key(1)].Committed == 2*fleetCost })
	if u := f.usage()[f.key(1)]; u.Reserved != 0 {
		t.Errorf("the journal a crashed proxy claimed is never sent: calls refused during the stall stay reserved (%d)", u.Reserved)
	}
}

// RT8. store recover reads each audit log with Open (a log whose proxy
// still runs) and never says that a log does not end at its final
// checkpoint: a log cut back (its last entries removed, or its proxy
// killed) is rebuilt short, the reset is lifted, and nothing in the
// output names the log. The rebuilt spend is below what was forwarded.
// Now the output names each log without its final checkpoint, and
// --head LOG=DIGEST has a log cut back past its head refused.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamRecoverSaysNothingOfATruncatedLog).
func TestE2EFaultRecoverNamesATruncatedLog(t *testing.T) {
	f := newStoreFleet(t)
	log := filepath.Join(f.e.Dir, "audit.log")
	p, s := f.start(f.a, f.audited("p", log), nil)
	n, _, _ := drain(t, s, 20)
	f.settled()
	stopProxy(t, p)
	f.srv.FlushAll()
	// The head the log had at its proxy's exit, as audit verify gives it.
	vout, verrs, vcode := mcptest.CLI(t, "audit", "verify", log)
	_, head, ok := strings.Cut(vout, " head ")
	head, _, _ = strings.Cut(head, "\n")
	if vcode != 0 || !ok || len(head) != 64 {
		t.Fatalf("audit verify: exit %d, %s%s", vcode, vout, verrs)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	mcptest.WriteFile(t, log, strings.Join(lines[:len(lines)/2], ""))
	// Given the head, a cut-back log is refused and nothing is rebuilt.
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log, "--head", log+"="+head)
	if code == 0 || !strings.Contains(errs, "does not verify") || f.usage()[f.key(1)].Committed != 0 {
		t.Errorf("store recover --head on a cut-back log: exit %d, %s%s; want it refused, nothing rebuilt", code, out, errs)
	}
	out, errs, code = mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log)
	t.Logf("store recover: exit %d\n%s%s", code, out, errs)
	rebuilt := f.usage()[f.key(1)].Committed / fleetCost
	if code == 0 && rebuilt < n && !strings.Contains(out, log) {
		t.Errorf("store recover rebuilt %d of the %d calls forwarded, lifted the reset, and its output does not name %s, which ends without its final checkpoint", rebuilt, n, log)
	}
}

// RT6, with the other root's proxy restarted: after a FLUSHALL only R1's
// proxy calls (R2's has exited, so R2's tree has no stamp to mark), store
// recover --root R1 writes a new generation, and R2's proxy, restarted
// on its machine, adopts it. It must not take R2's emptied tree for a
// new one: the generation names the trees it lifted, and the counts the
// machine saw of the others are kept.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamRecoverOneRootThenOtherRootRestarts).
func TestE2EFaultRecoverOneRootThenOtherRootRestarts(t *testing.T) {
	f1 := newStoreFleet(t)
	f2 := f1.otherRoot()
	log1 := filepath.Join(f1.e.Dir, "audit-1.log")
	_, s1 := f1.start(f1.a, f1.audited("p1", log1), nil)
	p2, s2 := f2.start(f2.a, "", nil)
	n1, _, _ := drain(t, s1, 20)
	n2, _, _ := drain(t, s2, 20)
	f1.settled()
	f2.settled()
	stopProxy(t, p2)
	f1.srv.FlushAll()
	if typ, detail := denialData(s1.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(gate.StoreReset) {
		t.Fatalf("tree 1 after the flush: %s: %s, want store_reset", typ, detail)
	}
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f1.srv.URL(), "--root", f1.e.Root.ID(), "--audit", log1)
	if code != 0 {
		t.Fatalf("store recover --root R1: exit %d, %s%s", code, out, errs)
	}
	if m, typ, _ := drain(t, s1, 20); n1+m > 30 || typ != string(dct.BudgetExceeded) {
		t.Fatalf("tree 1 after its recovery: %d+%d forwarded, then %s", n1, m, typ)
	}
	p3, s3 := f2.start(f2.a, "", nil) // R2's machine: it saw the tree
	more, typ, detail := drain(t, s3, 40)
	f2.sameAsUpstreams([]*mcptest.Process{p2, p3}, n2+more)
	if more > 0 || typ != string(gate.StoreReset) {
		t.Errorf("tree 2, whose spend no one rebuilt, after store recover --root R1 and a restart of its proxy: %d more calls forwarded (%d on a budget of 30), then %s: %s; want store_reset until its own recovery", more, n2+more, typ, detail)
	}
}

// RT6 with store init --reset (the red team: "store init --reset by the
// other fleet's operator on a shared Redis does the same"): --root R1
// accepts the loss of R1's trees only; R2's proxy still refuses.
// Found by the red team of issue 19's store history, fixed (was TestRedTeamInitResetOneRootLeavesAnother).
func TestE2EFaultInitResetOneRootLeavesAnother(t *testing.T) {
	f1 := newStoreFleet(t)
	f2 := f1.otherRoot()
	_, s1 := f1.start(f1.a, "", nil)
	p2, s2 := f2.start(f2.a, "", nil)
	drain(t, s1, 20)
	n2, _, _ := drain(t, s2, 20)
	f1.settled()
	f2.settled()
	f1.srv.FlushAll()
	for i, s := range []*mcptest.Session{s1, s2} {
		if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(gate.StoreReset) {
			t.Fatalf("tree %d after the flush: %s: %s, want store_reset", i+1, typ, detail)
		}
	}
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f1.srv.URL(), "--root", f1.e.Root.ID()); code == 0 {
		t.Fatalf("store init --root without --reset: exit 0, %s%s", out, errs)
	}
	out, errs, code := mcptest.CLI(t, "store", "init", "--store", f1.srv.URL(), "--reset", "--root", f1.e.Root.ID())
	if code != 0 {
		t.Fatalf("store init --reset --root R1: exit %d, %s%s", code, out, errs)
	}
	if m, typ, detail := drain(t, s1, 40); m != 30 || typ != string(dct.BudgetExceeded) {
		t.Fatalf("tree 1 after its loss was accepted: %d forwarded (its budget restarts), then %s: %s", m, typ, detail)
	}
	more, typ, detail := drain(t, s2, 40)
	f2.sameAsUpstreams([]*mcptest.Process{p2}, n2+more)
	if more > 0 || typ != string(gate.StoreReset) {
		t.Errorf("tree 2 after store init --reset --root R1: %d more calls forwarded, then %s: %s; want store_reset", more, typ, detail)
	}
}
