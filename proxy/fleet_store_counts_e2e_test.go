//go:build unix

package proxy_test

// A fleet's store losing data (issue 19): the counts each machine keeps
// of the trees it saw (STATE/*.seen.json). Found by the second red team
// of the store history (R2-n), fixed. Shared setup: fleet_store_e2e_test.go.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// R2-1. The kept counts file is unreadable (truncated, corrupted, or
// deleted): readSeen (budget/identity.go:302) takes it for "no counts", so
// a restarted proxy accepts Redis back on an older snapshot (RT2 again),
// while the identity file in the same state is refused when corrupt.
func TestE2EFaultCorruptSeenFileRefused(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 40)
	f.settled()
	stopProxy(t, p1)
	for _, p := range f.seenFiles() {
		if err := os.WriteFile(p, []byte(`{"id":`), 0o600); err != nil { // cut short
			t.Fatal(err)
		}
	}
	f.restore(snap)
	stderr := f.startRefused("on a cut seen.json")
	if !strings.Contains(stderr, "not a file of seen counts") {
		t.Errorf("the refusal does not name the seen file: %s", stderr)
	}
	f.sameAsUpstreams([]*mcptest.Process{p1}, n+m)
}

// R2-8. The kept counts are written "at most once a second" only when a
// count grows (seenGrew, budget/identity.go:373): a raise within a second
// of the last write is never written until Close, however long the proxy
// then stays idle. A crash (power loss, kill -9) of an idle proxy, with
// Redis back on an older snapshot (the same power loss restarting Redis
// from its RDB), loses the whole burst: RT2 again.
func TestE2EFaultIdleProxyWritesItsLastCounts(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", func(int) bool { return true }) // killed below
	n, _, _ := drain(t, s1, 1)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 40)
	f.settled()
	kept := func() string {
		b, _ := os.ReadFile(filepath.Join(f.seenFiles()[0]))
		return string(b)
	}
	want := fmt.Sprintf(":%d}", n+m)
	deadline := time.Now().Add(3 * time.Second) // three times the documented bound
	for time.Now().Before(deadline) && !strings.Contains(kept(), want) {
		time.Sleep(50 * time.Millisecond)
	}
	file := kept()
	pid := p1.UpstreamPID()
	if err := p1.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	p1.WaitExit(mcptest.WaitTimeout)
	f.restore(snap)
	p2, s2 := f.start(f.a, "", nil)
	more, typ, detail := drain(t, s2, 40)
	total := n + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	if total > 30 {
		t.Errorf("the proxy saw %d calls and idled 3 s, its kept counts were %s; killed, Redis back on a snapshot of %d: the restarted proxy forwarded %d more (%d on 30), then %s: %s; want store_reset", n+m, file, n, more, total, typ, detail)
	}
}

// R2-2. Two proxies share a state directory (the same machine); one is
// idle from before an operator's store init --reset. The other spends the
// budget under the new generation and exits, writing its counts; the idle
// one exits later and saveSeen (budget/identity.go:346) writes its own
// old-generation counts over them (readSeen of a newer file gives nil, so
// nothing is merged). Redis then goes back to a snapshot taken under the
// new generation: a restarted proxy reads the old-generation counts, which
// init --reset lifted, and overspends.
func TestE2EFaultStaleGenerationProxyKeepsNewerCounts(t *testing.T) {
	f := newStoreFleet(t)
	pB, sB := f.start(f.a, "", nil)
	b, _, _ := drain(t, sB, 5)
	f.settled()
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset"); code != 0 {
		t.Fatalf("store init --reset: %d %s %s", code, out, errs)
	}
	pA, sA := f.start(f.a, "", nil)
	n, _, _ := drain(t, sA, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, sA, 40)
	f.settled()
	stopProxy(t, pA)
	stopProxy(t, pB) // idle since before the new generation
	f.restore(snap)
	pC, sC := f.start(f.a, "", nil)
	more, typ, detail := drain(t, sC, 40)
	total := b + n + m + more
	f.sameAsUpstreams([]*mcptest.Process{pB, pA, pC}, total)
	if total > 30 {
		t.Errorf("an idle old-generation proxy's exit replaced the kept counts; Redis back on a snapshot of %d calls: the restarted proxy forwarded %d more (%d on 30), then %s: %s; want store_reset", b+n, more, total, typ, detail)
	}
}

// R2-3. The same Redis named two ways (127.0.0.1 and localhost): the
// state files were named by the URL's host as written, so a proxy
// restarted with the other spelling knew no counts and accepted an older
// snapshot (50 calls on 30). The counts are kept under the store's
// identity, which the snapshot keeps, so any spelling finds them.
func TestE2EFaultOtherSpellingOfTheSameServer(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 40)
	f.settled()
	stopProxy(t, p1)
	f.restore(snap)
	pol := f.policy("")
	pol.SpendStore = strings.Replace(pol.SpendStore, "127.0.0.1", "localhost", 1)
	pol.RevocationList = strings.Replace(pol.RevocationList, "127.0.0.1", "localhost", 1)
	if pol.SpendStore == f.policy("").SpendStore {
		t.Fatalf("store URL %s has no 127.0.0.1", pol.SpendStore)
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s2 := p2.Connect(mcptest.SessionOptions{})
	more, typ, detail := drain(t, s2, 40)
	total := n + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	want := fmt.Sprintf("counts %d calls, fewer than the %d this proxy saw", n, n+m)
	if total > 30 || more != 0 || typ != string(gate.StoreReset) || !strings.Contains(detail, want) {
		t.Errorf("the same Redis as localhost, back on a snapshot of %d calls: the restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset (%s)", n, more, total, typ, detail, want)
	}
}

// R2-1, the file deleted: a machine that saw the store always has its
// counts file (written at the first start, empty if need be), and its
// index of the store's identity says so, so a deleted file is not taken
// for "no counts": the restarted proxy refuses to start.
func TestE2EFaultDeletedSeenFileRefused(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 40)
	f.settled()
	stopProxy(t, p1)
	for _, p := range f.seenFiles() {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	f.restore(snap)
	stderr := f.startRefused("on a deleted seen.json")
	if !strings.Contains(stderr, "is gone (deleted)") || !strings.Contains(stderr, "store init --reset") {
		t.Errorf("the refusal does not say the seen file is gone and what to run: %s", stderr)
	}
	f.sameAsUpstreams([]*mcptest.Process{p1}, n+m)
}

// R2-5. Two fleets (two roots) share a Redis. Only fleet 1's tree loses
// its keys (deleted by hand, evicted): fleet 1's proxies refuse
// store_reset, and the refusal names the tree's root and the command that
// lifts that tree alone; fleet 2's intact tree goes on, in its running
// proxy and in one started after the loss was found (the whole store
// used to be marked reset, so every new proxy of every fleet refused).
func TestE2EFaultOneTreesLossLeavesAnotherFleet(t *testing.T) {
	f1 := newStoreFleet(t)
	f2 := f1.otherRoot()
	_, s1 := f1.start(f1.a, "", nil)
	_, s2 := f2.start(f2.a, "", nil)
	drain(t, s1, 5)
	drain(t, s2, 5)
	f1.settled()
	f2.settled()
	ctx := context.Background()
	c := f1.srv.Client()
	root1 := f1.e.Root.ID()
	keys, err := c.Keys(ctx, "delegateos:spend:{"+root1+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("tree 1's spend keys: %v %v", keys, err)
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	typ, detail := denialData(s1.Call(t, "echo", map[string]any{"text": "tree 1 after"}))
	want := "store init --store URL --reset --root " + root1
	if typ != string(gate.StoreReset) || !strings.Contains(detail, want) || !strings.Contains(detail, "fewer than the 5 this proxy saw") {
		t.Fatalf("tree 1 after its keys were deleted: %s: %s; want store_reset naming the count lost and %q", typ, detail, want)
	}
	if typ, detail := denialData(s2.Call(t, "echo", map[string]any{"text": "tree 2, running proxy"})); typ != "" {
		t.Errorf("tree 2's running proxy after tree 1's loss: %s: %s", typ, detail)
	}
	_, s3 := f2.start(f2.a, "", nil)
	if typ, detail := denialData(s3.Call(t, "echo", map[string]any{"text": "tree 2, new proxy"})); typ != "" {
		t.Errorf("tree 2 (intact) in a proxy started after tree 1 lost its keys: %s: %s; want it forwarded (only tree 1 lost data)", typ, detail)
	}
	_, s4 := f1.start(f1.a, "", nil)
	if typ, detail := denialData(s4.Call(t, "echo", map[string]any{"text": "tree 1, new proxy"})); typ != string(gate.StoreReset) || !strings.Contains(detail, want) {
		t.Errorf("tree 1 in a proxy started after its loss was found: %s: %s; want store_reset naming %q", typ, detail, want)
	}
	// Fleet 1's operator accepts the loss of its tree alone.
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f1.srv.URL(), "--reset", "--root", root1); code != 0 {
		t.Fatalf("store init --reset --root: %d %s %s", code, out, errs)
	}
	for i, s := range []*mcptest.Session{s1, s4, s2, s3} {
		if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after init --reset --root"})); typ != "" {
			t.Errorf("session %d after store init --reset --root %s: %s: %s; want it forwarded", i+1, root1, typ, detail)
		}
	}
	if u := f2.usage()[f2.key(1)]; u.Calls != 9 {
		t.Errorf("tree 2 counts %d calls, want the 9 forwarded", u.Calls)
	}
}

// R2-6. store recover given the audit logs of only some of the fleet's
// proxies (a machine's log not at hand) lifts the reset; the proxy whose
// log was left out saw the root's count at 20, and adopting the
// recovery's generation used to forget that count, so it spent its calls
// again (40 on 30). A recovery now keeps the counts (only store init
// --reset forgets them): that proxy finds the rebuilt count short, refuses
// store_reset saying to give every proxy's log, and the recovery run
// again with both logs lets the fleet spend exactly the rest.
func TestE2EFaultRecoverWithSomeLogsOnly(t *testing.T) {
	f := newStoreFleet(t)
	log1 := filepath.Join(f.e.Dir, "audit-1.log")
	log2 := filepath.Join(f.e.Dir, "audit-2.log")
	p1, s1 := f.start(f.a, f.audited("p1", log1), nil)
	p2, s2 := f.start(f.a, f.audited("p2", log2), nil)
	n1, _, _ := drain(t, s1, 10)
	n2, _, _ := drain(t, s2, 10)
	f.settled()
	f.srv.FlushAll()
	for i, s := range []*mcptest.Session{s1, s2} {
		if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(gate.StoreReset) {
			t.Fatalf("proxy %d after the flush: %s: %s, want store_reset", i+1, typ, detail)
		}
	}
	if out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log1); code != 0 {
		t.Fatalf("store recover with proxy 1's log: exit %d, %s%s", code, out, errs)
	}
	more, typ, detail := drain(t, s2, 40)
	want := fmt.Sprintf("counts %d calls, fewer than the %d this proxy saw", n1, n1+n2)
	if more != 0 || typ != string(gate.StoreReset) || !strings.Contains(detail, want) || !strings.Contains(detail, "audit logs of every proxy of the fleet") {
		t.Fatalf("store recover with proxy 1's log only: proxy 2, which saw %d calls on the root, forwarded %d more, then %s: %s; want none, store_reset (%s, give every proxy's log)", n1+n2, more, typ, detail, want)
	}
	if typ, detail := denialData(s1.Call(t, "echo", map[string]any{"text": "proxy 1 after proxy 2 found the rebuild short"})); typ != string(gate.StoreReset) {
		t.Errorf("proxy 1 after proxy 2 found the rebuild short: %s: %s, want store_reset", typ, detail)
	}
	if out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log1, "--audit", log2); code != 0 {
		t.Fatalf("store recover with both logs: exit %d, %s%s", code, out, errs)
	}
	more, typ, detail = drain(t, s2, 40)
	total := n1 + n2 + more
	f.settled()
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	if total != 30 || typ != string(dct.BudgetExceeded) {
		t.Errorf("after store recover with both logs: %d forwarded in all on 30, then %s: %s; want exactly 30, then budget_exceeded", total, typ, detail)
	}
}

// R2-7. Generations were wall-clock milliseconds, and a proxy adopts an
// operator's generation only when it is after the one it saw. The store
// was made by a proxy whose clock ran an hour ahead (here: its identity
// hash written as such a proxy writes it). Redis is flushed and the
// operator, on another machine, runs store init --reset before any proxy
// noticed: the store has no identity, and the operator's clock gives a
// generation an hour before the proxies'. Each further init --reset used
// to add 1 ms: the fleet stayed wedged until the operator's clock passed
// the old generation. Now the proxies refuse it saying so, record the
// generation they saw in the store, and the operator's next init --reset
// gives a generation after it, which running and new proxies adopt.
func TestE2EFaultOperatorClockBehind(t *testing.T) {
	f := newStoreFleet(t)
	ctx := context.Background()
	c := f.srv.Client()
	ahead := time.Now().Add(time.Hour).UnixMilli()
	if err := c.HSet(ctx, "delegateos:store", "id", "0123456789abcdef01234567", "g", ahead, "by", "proxy").Err(); err != nil {
		t.Fatal(err)
	}
	_, s := f.start(f.a, "", nil)
	if n, typ, detail := drain(t, s, 5); n != 5 {
		t.Fatalf("before the flush: %d forwarded, then %s: %s", n, typ, detail)
	}
	f.settled()
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	initReset := func() {
		t.Helper()
		if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset"); code != 0 {
			t.Fatalf("store init --reset: %d %s %s", code, out, errs)
		}
	}
	initReset()
	want := fmt.Sprintf("the store now records that a proxy saw generation %d, so an operator who accepts the loss runs store init --reset (or store recover) again", ahead)
	typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after an init --reset from behind"}))
	if typ != string(gate.StoreReset) || !strings.Contains(detail, "which an operator wrote") || !strings.Contains(detail, want) {
		t.Fatalf("a call after an init --reset whose generation is before the proxies': %s: %s; want store_reset saying %q", typ, detail, want)
	}
	initReset()
	if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after init --reset again"})); typ != "" {
		t.Errorf("a call after the operator's store init --reset, run again: %s: %s; want it forwarded", typ, detail)
	}
	_, s2 := f.start(f.a, "", nil)
	if typ, detail := denialData(s2.Call(t, "echo", map[string]any{"text": "new proxy after init --reset"})); typ != "" {
		t.Errorf("a proxy started after store init --reset: %s: %s; want it forwarded", typ, detail)
	}
	if g, err := c.HGet(ctx, "delegateos:store", "g").Int64(); err != nil || g <= ahead {
		t.Errorf("the store's generation is %d (%v), want one after the proxies' %d", g, err, ahead)
	}
}
