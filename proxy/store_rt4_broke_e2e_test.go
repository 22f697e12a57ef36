//go:build unix && redteam

package proxy_test

// Fourth red team of issue 19's store history (after the R3 fixes):
// attacks that broke the product. Run with -tags redteam; each moves to
// the normal suite once fixed.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// R4-1. Redis goes back to an older snapshot (a failover to a replica
// that lagged, an RDB restart) while machine 1's proxy, which saw the
// root count 20, idles. Machine 2's proxy, which never saw the tree,
// makes 10 calls (it cannot know), taking the root's count back to 20.
// Machine 1's proxy then compares its 20 with the store's 20 and goes on:
// the rollback is never noticed, and machine 1 forwards 10 more (40 on
// 30). Want: machine 1 refuses store_reset (its own calls are gone).
func TestRedTeam4RollbackMaskedByAnotherMachine(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	f.restore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	k, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
	more, typ, detail := drain(t, s1, 40)
	total := n + m + k + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls, Redis went back to a snapshot of %d, machine 2 made %d: machine 1's proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n+m, n, k, more, total, typ, detail)
	}
}

// R4-2. R4-1 with machine 1's proxy stopped before the rollback and
// started again after machine 2's calls: its machine's counts (20) are
// compared with the store's count, which machine 2 took back to 20.
func TestRedTeam4RollbackMaskedBeforeRestart(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	f.restore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	k, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
	p3, s3 := f.start(f.a, "", nil)
	more, typ, detail := drain(t, s3, 40)
	total := n + m + k + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls and stopped, Redis went back to a snapshot of %d, machine 2 made %d: machine 1's restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n+m, n, k, more, total, typ, detail)
	}
}

// R4-3. R4-1 within one machine: proxies A and B share a state
// directory (stdio proxies run per session). A makes 5 calls and idles;
// B takes the root to 20. Redis goes back to the snapshot at 10; A, which
// saw 5, makes 10 calls (the count back at 20); B then goes on.
func TestRedTeam4RollbackMaskedBySameMachineProxy(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	pa, sa := f.start(f.a, "", nil)
	na, _, _ := drain(t, sa, 5)
	pb, sb := f.start(f.a, "", nil)
	nb, _, _ := drain(t, sb, 5)
	f.settled()
	snap := f.snapshot()
	mb, _, _ := drain(t, sb, 10)
	f.settled()
	f.restore(snap)
	ka, typa, _ := drain(t, sa, 10)
	more, typ, detail := drain(t, sb, 40)
	total := na + nb + mb + ka + more
	f.sameAsUpstreams([]*mcptest.Process{pa, pb}, total)
	if total > 30 || typ != string(gate.StoreReset) {
		t.Errorf("A made %d calls, B %d, Redis went back to a snapshot at %d, A made %d more (then %q); B forwarded %d more (%d on 30), then %s: %s; want store_reset, at most 30", na, nb+mb, na+nb, ka, typa, more, total, typ, detail)
	}
}

// R4-4. The machine's durable copy of the ended-delegation set is named by
// the URL as written: a delegation completed at a proxy naming the set
// redis://127.0.0.1:P/0; that proxy exits; Redis is flushed; a proxy of
// another workspace on the same machine naming the set
// redis://localhost:P finds no copy and takes the completed delegation's
// token again.
func TestRedTeam4EndedCopyOtherSpelling(t *testing.T) {
	srv := redistest.Start(t)
	r := newDelegationRun(t)
	ws1 := filepath.Join(r.e.Dir, "ws1")
	r.p, r.s = startEndedWorkspaceAt(t, r, srv.URL(), ws1)
	r.ws = ws1
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	if done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 100); done.Status != "completed" {
		t.Fatalf("complete: %+v", done)
	}
	stopProxy(t, r.p)
	if err := srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(ws1)
	other := strings.Replace(srv.URL(), "127.0.0.1", "localhost", 1)
	other = strings.TrimSuffix(other, "/0")
	_, s2 := startEndedWorkspaceAt(t, r, other, filepath.Join(r.e.Dir, "ws2"))
	got := s2.CallAs(t, r.bTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
	if typ, detail := denialData(got); typ != string(dct.Expired) {
		t.Errorf("completed delegation %s, its ending flushed while no proxy ran; a proxy naming the set %s answered %+v (%s: %s); want it refused as ended", delB, other, got.Res, typ, detail)
	}
}

// startEndedWorkspaceAt is startEndedWorkspace with the set at url.
func startEndedWorkspaceAt(t *testing.T, r *delegationRun, url, ws string) (*mcptest.Process, *mcptest.Session) {
	t.Helper()
	revs := filepath.Join(r.e.Dir, filepath.Base(ws)+"-revocations.json")
	mcptest.WriteFile(t, revs, "[]\n")
	pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
	pol.Rules = pol.Rules[1:]
	pol.RevocationList = revs
	key := mcptest.NewKey(t, filepath.Base(ws))
	pol.Extra = "workspace: " + strconv.Quote(ws) + "\nended_delegations: " + strconv.Quote(url) +
		"\nproxy_key: " + r.e.KeyFile(key) + "\naudit_log: " + filepath.Join(ws+"-audit.log") + "\n"
	p := r.e.StartProxy(mcptest.ProxyOptions{Policy: pol})
	return p, p.Connect(mcptest.SessionOptions{})
}

// R4-6. The rate-limit windows of a tree are lost alone (DEL by hand,
// eviction after CONFIG SET maxmemory-policy, a partial restore), its
// spend keys and stamp kept: nothing checks them, and a delegation that
// used its 5 calls an hour gets 5 more. Want: refused (rate_limited, or
// store_reset: the store lost the tree's windows).
func TestRedTeam4RateWindowsLostAlone(t *testing.T) {
	f := newFleet(t, 100*fleetCost, 60*fleetCost, 30*fleetCost)
	p, s := f.start(f.b, "rate: 5/1h\n", nil)
	for i := range 5 {
		s.Call(t, "echo", map[string]any{"text": strconv.Itoa(i)}).OK(t, "a call within the rate")
	}
	if typ, _ := denialData(s.Call(t, "echo", map[string]any{"text": "sixth"})); typ != string(gate.RateLimited) {
		t.Fatalf("the sixth call in the hour: %s, want rate_limited", typ)
	}
	ctx := context.Background()
	c := f.srv.Client()
	keys, err := c.Keys(ctx, "delegateos:rate:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the rate windows: %v %v", keys, err)
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	more, typ, detail := drain(t, s, 10)
	f.sameAsUpstreams([]*mcptest.Process{p}, 5+more)
	if more != 0 {
		t.Errorf("5 calls on a rate of 5 an hour, the tree's rate windows deleted: %d more forwarded within the hour, then %s: %s; want none", more, typ, detail)
	}
}

// R4-8. A revocation that revoke confirmed, the proxies that knew it
// stopped (stdio proxies run per session), then Redis loses its data
// (FLUSHALL, as a restart without persistence); the operator accepts the
// spend's loss (store init --reset). A proxy without a workspace keeps no
// copy of the list, so when one starts again on the same machine it takes
// the revoked token. (With a workspace, only that
// workspace's proxies keep one: R4-9.)
func TestRedTeam4RevocationForgottenWithoutWorkspace(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	p, s := f.start(f.b, "", nil)
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "B's call")
	if out, err := f.revokeB(f.url); err != nil {
		t.Fatalf("delegateos revoke: %v\n%s", err, out)
	}
	refusesB(t, s, "B's proxy")
	stopProxy(t, p)
	if err := f.srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// The operator accepts the spend's loss (the proxies refuse
	// store_reset until then); nothing restores the list.
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset"); code != 0 {
		t.Fatalf("store init --reset: %d %s%s", code, out, errs)
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.b, WantExit: func(int) bool { return true }})
	if !p2.WaitExit(mcptest.WaitTimeout) {
		r := p2.Connect(mcptest.SessionOptions{}).Call(t, "echo", map[string]any{"text": "revoked?"})
		typ, detail := denialData(r)
		t.Errorf("B revoked, its proxy stopped, Redis flushed: the proxy restarted on the same machine is running and answers B's call %s: %s; want it refused as revoked (or the proxy refusing to start)", typ, detail)
	}
}

// R4-9. R4-8 with workspaces: the revocation is kept in the workspace of
// the proxy that knew it; a proxy of another workspace on the same
// machine, started after the flush, takes the revoked token (the ended
// set, by contrast, is kept per machine in the state directory).
func TestRedTeam4RevocationForgottenOtherWorkspace(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	p, s := f.start(f.b, f.workspace("ws-1"), nil)
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "B's call")
	if out, err := f.revokeB(f.url); err != nil {
		t.Fatalf("delegateos revoke: %v\n%s", err, out)
	}
	refusesB(t, s, "B's proxy")
	stopProxy(t, p)
	if err := f.srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// The operator accepts the spend's loss (the proxies refuse
	// store_reset until then); nothing restores the list.
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset"); code != 0 {
		t.Fatalf("store init --reset: %d %s%s", code, out, errs)
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(f.workspace("ws-2")), Token: f.b, WantExit: func(int) bool { return true }})
	if !p2.WaitExit(mcptest.WaitTimeout) {
		r := p2.Connect(mcptest.SessionOptions{}).Call(t, "echo", map[string]any{"text": "revoked?"})
		typ, detail := denialData(r)
		t.Errorf("B revoked, its proxy (workspace 1) stopped, Redis flushed: a proxy of workspace 2 on the same machine is running and answers B's call %q: %s; want it refused as revoked (or the proxy refusing to start)", typ, detail)
	}
}
