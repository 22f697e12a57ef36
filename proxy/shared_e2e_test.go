//go:build unix

package proxy_test

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// newSharedFleet is newFleet on the embedded default: a spend store at a
// path, which every proxy of the machine opening it shares (a SQLite
// database), instead of Redis.
func newSharedFleet(t *testing.T, budgetA, budgetB, budgetC int64) *fleet {
	t.Helper()
	return newFleetOn(t, filepath.Join(t.TempDir(), "spend.db"), budgetA, budgetB, budgetC)
}

// settled waits until no reservation of the fleet's store is held: a
// commit at the reserved cost is written just after the call's answer.
func settled(t *testing.T, f *fleet) {
	t.Helper()
	mcptest.Eventually(t, "every reservation settled", func() bool {
		for _, u := range f.usage() {
			if u.Reserved != 0 {
				return false
			}
		}
		return true
	})
}

// startLocal starts a proxy with tok on the fleet's local store, and
// extra in its policy.
func (f *fleet) startLocal(tok *dct.Token, extra string, wantExit func(int) bool) (*mcptest.Process, *mcptest.Session) {
	pol := f.e.Policy(mcptest.Priced("echo", fleetCost), mcptest.Priced("slow", fleetCost))
	pol.SpendStore = f.url
	pol.Extra = extra
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok, WantExit: wantExit})
	return p, p.Connect(mcptest.SessionOptions{})
}

// Four proxies on one policy and one machine (Claude Desktop, Cursor and
// two terminals), with 50 calls each in parallel on one delegation tree:
// all four start (the spend store, the rate windows and the audit log
// were one process's before), no level's budget is passed, every level is
// charged exactly what was forwarded under it, and each proxy's audit log
// in the audit_log directory verifies. The fourth proxy's policy differs
// (a rate that does not bind, another audit key): it shares the store all
// the same.
func TestE2ESharedStoreFourProxiesExact(t *testing.T) {
	f := newSharedFleet(t, 100*fleetCost, 50*fleetCost, 20*fleetCost)
	auditDir := filepath.Join(f.e.Dir, "audit") + "/"
	key := mcptest.NewKey(t, "proxy")
	extra := "proxy_key: " + f.e.KeyFile(key) + "\naudit_log: " + auditDir + "\n"
	toks := []*dct.Token{f.a, f.b, f.c, f.c}
	procs := make([]*mcptest.Process, 4)
	sessions := make([]*mcptest.Session, 4)
	for i, tok := range toks {
		x := extra
		if i == 3 {
			x += "rate: 100000/1h\n"
		}
		procs[i], sessions[i] = f.startLocal(tok, x, nil)
	}
	var allowed [4]atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 4 {
		for j := range 50 {
			wg.Go(func() {
				<-start
				r := sessions[i].Call(t, "echo", map[string]any{"text": fmt.Sprintf("%d-%d", i, j)})
				if r.Err == nil && !r.Res.IsError {
					allowed[i].Add(1)
					return
				}
				if typ, detail := denialData(r); typ != string(dct.BudgetExceeded) {
					t.Errorf("proxy %d call %d: %v (%s: %s), want allowed or budget_exceeded", i, j, r.Err, typ, detail)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	nA, nB, nC := allowed[0].Load(), allowed[1].Load(), allowed[2].Load()+allowed[3].Load()
	t.Logf("allowed: %d under A, %d under B, %d under C (two proxies)", nA, nB, nC)
	// Commits at the reserved cost are written after the answer.
	settled(t, f)
	u := f.usage()
	for _, lv := range []struct {
		key         string
		calls, want int64
	}{
		{f.key(1), nA + nB + nC, 100},
		{f.key(2), nB + nC, 50},
		{f.key(3), nC, 20},
	} {
		got := u[lv.key]
		if got.Committed != lv.calls*fleetCost || got.Reserved != 0 || got.Calls != lv.calls {
			t.Errorf("%s: committed %d, reserved %d, %d calls; want exactly the %d forwarded calls (%d)", lv.key, got.Committed, got.Reserved, got.Calls, lv.calls, lv.calls*fleetCost)
		}
		if lv.calls > lv.want {
			t.Errorf("%s: %d calls allowed, over its budget of %d", lv.key, lv.calls, lv.want)
		}
	}
	// Demand is over the root's budget (A alone asks 50, B and C 150 under
	// B's 50), and over B's: both are filled exactly, so a refusal only
	// ever came from a level with no room.
	if nA+nB+nC != 100 || nB+nC != 50 || nA != 50 {
		t.Errorf("allowed %d in all, %d under B, %d under A alone; want 100, 50 and 50", nA+nB+nC, nB+nC, nA)
	}
	for _, s := range sessions {
		s.Close()
	}
	for i, p := range procs {
		p.Stdin.Close()
		if !p.WaitExit(mcptest.WaitTimeout) {
			t.Fatalf("proxy %d did not exit", i)
		}
	}
	out, err := exec.Command(mcptest.Delegateos(t), "audit", "verify", auditDir, "--key-id", key.DID()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "4 audit logs in "+auditDir) || strings.Count(string(out), "OK audit log") != 4 {
		t.Fatalf("audit verify DIR: %v\n%s", err, out)
	}
}

// Four proxies on one policy share its rate-limit windows: with a rate of
// 30 an hour, 60 calls in parallel through four proxies admit exactly 30.
func TestE2ESharedStoreRateWindows(t *testing.T) {
	f := newSharedFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	sessions := make([]*mcptest.Session, 4)
	for i := range sessions {
		_, sessions[i] = f.startLocal(f.a, "rate: 30/1h\n", nil)
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 60 {
		wg.Go(func() {
			<-start
			r := sessions[i%4].Call(t, "echo", map[string]any{"text": fmt.Sprint(i)})
			if r.Err == nil && !r.Res.IsError {
				allowed.Add(1)
				return
			}
			if typ, detail := denialData(r); typ != string(gate.RateLimited) {
				t.Errorf("call %d: %v (%s: %s), want allowed or rate_limited", i, r.Err, typ, detail)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := allowed.Load(); got != 30 {
		t.Fatalf("%d calls admitted by four proxies, want the policy's 30", got)
	}
	settled(t, f)
	if got := f.usage()[f.key(1)].Committed; got != 30*fleetCost {
		t.Fatalf("committed %d, want %d", got, 30*fleetCost)
	}
}

// A proxy killed (kill -9) with a call in flight, beside another that
// runs on: the killed call's reservation stays charged (the others count
// it as spent), the next proxy to start settles it at its reserved cost,
// the budget stays exact, and the killed proxy's audit log is continued
// after a recovery checkpoint, so the directory still verifies.
func TestE2ESharedStoreKilledProxy(t *testing.T) {
	f := newSharedFleet(t, 3*fleetCost, 3*fleetCost, 3*fleetCost)
	auditDir := filepath.Join(f.e.Dir, "audit") + "/"
	extra := f.audited("proxy", auditDir)
	p1, s1 := f.startLocal(f.a, extra, func(code int) bool { return code == -1 })
	_, s2 := f.startLocal(f.a, extra, nil)
	done := make(chan mcptest.Result, 1)
	go func() { done <- s1.Call(t, "slow", map[string]any{"steps": 50, "delay_ms": 100}) }()
	mcptest.Eventually(t, "the slow call's reservation", func() bool { return f.usage()[f.key(1)].Reserved == fleetCost })
	pid := p1.UpstreamPID()
	if err := p1.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	<-done
	if u := f.usage()[f.key(1)]; u.Reserved != fleetCost || u.Committed != 0 {
		t.Fatalf("after the kill: %+v, want the call's %d still reserved", u, fleetCost)
	}
	s2.Call(t, "echo", map[string]any{"text": "second"}).OK(t, "a call beside the charged one")
	_, s3 := f.startLocal(f.a, extra, nil)
	settled(t, f)
	if u := f.usage()[f.key(1)]; u.Reserved != 0 || u.Committed != 2*fleetCost {
		t.Fatalf("after a proxy started: %+v, want the killed call settled at %d beside the second", u, fleetCost)
	}
	s3.Call(t, "echo", map[string]any{"text": "the last room"}).OK(t, "the third call")
	for _, s := range []*mcptest.Session{s2, s3} {
		r := s.Call(t, "echo", map[string]any{"text": "one too many"})
		if typ, _ := denialData(r); typ != string(dct.BudgetExceeded) {
			t.Fatalf("a fourth call on a budget of three: %+v, want budget_exceeded", r)
		}
	}
	settled(t, f)
	if u := f.usage()[f.key(1)]; u.Reserved != 0 || u.Committed != 3*fleetCost || u.Calls != 3 {
		t.Fatalf("at the end: %+v, want 3 calls, %d committed", u, 3*fleetCost)
	}
	out, err := exec.Command(mcptest.Delegateos(t), "audit", "verify", auditDir, "--open", "--allow-recovered").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "2 audit logs in "+auditDir) || !strings.Contains(string(out), "recovered") {
		t.Fatalf("audit verify DIR after the kill: %v\n%s", err, out)
	}
}

// A database another process holds locked past the busy timeout refuses
// a call as store_unavailable, never budget_exceeded, and calls go
// through again once the lock is let go.
func TestE2ESharedStoreLockedIsUnavailable(t *testing.T) {
	f := newSharedFleet(t, 10*fleetCost, 10*fleetCost, 10*fleetCost)
	_, s := f.startLocal(f.a, "", nil)
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "a call before the lock")
	settled(t, f)
	db, err := sql.Open("sqlite", "file:"+f.url+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE spend SET held = held`); err != nil {
		t.Fatal(err)
	}
	r := s.Call(t, "echo", map[string]any{"text": "locked"})
	if typ, detail := denialData(r); typ != string(gate.StoreUnavailable) || !strings.Contains(detail, "busy timeout") {
		t.Fatalf("a call while the database is locked: %s: %s; want store_unavailable", typ, detail)
	}
	tx.Rollback()
	s.Call(t, "echo", map[string]any{"text": "after"}).OK(t, "a call after the lock")
	settled(t, f)
	if u := f.usage()[f.key(1)]; u.Committed != 2*fleetCost || u.Reserved != 0 {
		t.Fatalf("%+v: want the two forwarded calls", u)
	}
}

// A damaged database stops the proxy at start with what to do; no call
// is decided on it.
func TestE2ESharedStoreCorruptRefused(t *testing.T) {
	f := newSharedFleet(t, 10*fleetCost, 10*fleetCost, 10*fleetCost)
	p, s := f.startLocal(f.a, "", nil)
	s.Call(t, "echo", map[string]any{"text": "x"}).OK(t, "a call")
	s.Close()
	p.Stdin.Close()
	p.WaitExit(mcptest.WaitTimeout)
	b, err := os.ReadFile(f.url)
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < len(b); i++ {
		b[i] = 0xa5
	}
	if err := os.WriteFile(f.url, b, 0o600); err != nil {
		t.Fatal(err)
	}
	pol := f.e.Policy(mcptest.Priced("echo", fleetCost))
	pol.SpendStore = f.url
	path := filepath.Join(t.TempDir(), "policy.yaml")
	mcptest.WriteFile(t, path, pol.YAML())
	out, err := exec.Command(mcptest.Delegateos(t), "proxy", "--policy", path, "--", "true").CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "the spend store "+f.url+" cannot be opened") {
		t.Fatalf("a proxy on a damaged database: exit %d\n%s", code, out)
	}
}

// Two proxies on one policy share its workspace: a delegation completed
// at one is refused at the other at its next call, with no Redis (the
// workspace's chain log is read by every process that has it open).
func TestE2ESharedWorkspaceEndedDelegation(t *testing.T) {
	r := newDelegationRun(t) // its proxy is replaced below
	ws := filepath.Join(r.e.Dir, "ws-shared")
	revs := filepath.Join(r.e.Dir, "shared-revocations.json")
	mcptest.WriteFile(t, revs, "[]\n")
	start := func() (*mcptest.Process, *mcptest.Session) {
		pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
		pol.Rules = pol.Rules[1:]
		pol.RevocationList = revs
		pol.SpendStore = filepath.Join(r.e.Dir, "spend.db")
		pol.Extra = "workspace: " + strconv.Quote(ws) + "\n"
		p := r.e.StartProxy(mcptest.ProxyOptions{Policy: pol})
		return p, p.Connect(mcptest.SessionOptions{})
	}
	r.p, r.s = start()
	r.ws = ws
	_, other := start()
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	read := func() mcptest.Result {
		return other.CallAs(t, r.bTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
	}
	read().OK(t, "B's call at the other proxy before B completed")
	if done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 100); done.Status != "completed" {
		t.Fatalf("complete: %+v", done)
	}
	got := read()
	typ, detail := denialData(got)
	if typ != string(dct.Expired) || !strings.Contains(detail, delB+" has ended (completed)") {
		t.Fatalf("B's call at the other proxy after B completed: %s: %s", typ, detail)
	}
}

// A database in a directory the proxy cannot write (made immutable, which
// holds for root too) stops the proxy at start, naming what must be
// writable; no call is decided on a store that cannot record it. Where
// the file system has no immutable flag, a directory that is a file
// stands in for it.
func TestE2ESharedStoreReadOnlyDirRefused(t *testing.T) {
	f := newSharedFleet(t, 10*fleetCost, 10*fleetCost, 10*fleetCost)
	p, s := f.startLocal(f.a, "", nil)
	s.Call(t, "echo", map[string]any{"text": "x"}).OK(t, "a call")
	s.Close()
	p.Stdin.Close()
	p.WaitExit(mcptest.WaitTimeout)
	dir := filepath.Dir(f.url)
	store, want := f.url, "must be writable by the proxy's user"
	if err := exec.Command("chattr", "+i", dir).Run(); err == nil {
		t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
	} else {
		t.Logf("chattr +i: %v; a directory that is a file stands in", err)
		store, want = filepath.Join(f.url, "spend.db"), "cannot be opened"
	}
	pol := f.e.Policy(mcptest.Priced("echo", fleetCost))
	pol.SpendStore = store
	path := filepath.Join(t.TempDir(), "policy.yaml")
	mcptest.WriteFile(t, path, pol.YAML())
	out, err := exec.Command(mcptest.Delegateos(t), "proxy", "--policy", path, "--", "true").CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "the spend store "+store+" cannot be opened") || !strings.Contains(string(out), want) {
		t.Fatalf("a proxy on a database it cannot write: exit %d\n%s", code, out)
	}
}
