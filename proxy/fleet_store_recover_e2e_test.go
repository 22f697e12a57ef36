//go:build unix

package proxy_test

// A fleet's store losing data (issue 19): store recover and store init
// --root after a loss. Found by the third red team of the store history
// (R3-n), fixed. Shared setup: fleet_store_e2e_test.go.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// R3-8. A proxy writes the counts it saw at most once a second (a raise
// within the second arms a timer) and at exit, in the reset state too:
// the raises of the last second before the proxy found a loss are what
// show a recovery from only some logs short. Two proxies on two machines
// make 11 calls each, alternating; proxy 1 finds the loss right after
// (reset state; proxy 2 is then refused by the tree's stamp). Both stop
// cleanly: machine 1 keeps the root's count at proxy 1's last call (21),
// so store recover with proxy 2's log only (11 calls) is refused by
// proxy 1 restarted on its machine: store_reset, nothing forwarded. (The
// test holds each counts file's lock from before the first call until
// the loss is found, so that no background write can have written the
// last raises before the proxy entered the reset state, whatever the
// machine's speed.)
func TestE2EFaultCountsOfTheLastSecondWritten(t *testing.T) {
	f := newStoreFleet(t)
	log1 := filepath.Join(f.e.Dir, "audit-1.log")
	log2 := filepath.Join(f.e.Dir, "audit-2.log")
	machine2 := t.TempDir()
	p1 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(f.audited("p1", log1)), Token: f.a})
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(f.audited("p2", log2)), Token: f.a, Dir: machine2})
	s1, s2 := p1.Connect(mcptest.SessionOptions{}), p2.Connect(mcptest.SessionOptions{})
	// Both proxies have joined (they answer): their counts files exist.
	files := f.seenFiles()
	files2, _ := filepath.Glob(filepath.Join(machine2, "state", "*.seen.json"))
	if len(files) != 1 || len(files2) != 1 {
		t.Fatalf("counts files: %v %v", files, files2)
	}
	var locks []*os.File
	for _, p := range []string{files[0], files2[0]} {
		l, err := os.OpenFile(p+".lock", os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	unlock := func() {
		for _, l := range locks {
			l.Close()
		}
		locks = nil
	}
	t.Cleanup(unlock)
	var n1, n2 int64
	for range 11 {
		a, _, _ := drain(t, s1, 1)
		b, _, _ := drain(t, s2, 1)
		n1, n2 = n1+a, n2+b
	}
	f.settled()
	f.srv.FlushAll()
	for i, s := range []*mcptest.Session{s1, s2} {
		if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(gate.StoreReset) {
			t.Fatalf("proxy %d after the flush: %s: %s, want store_reset", i+1, typ, detail)
		}
	}
	unlock()
	stopProxy(t, p1)
	stopProxy(t, p2)
	kept := func(path string) string { b, _ := os.ReadFile(path); return string(b) }
	t.Logf("kept counts after a clean exit: machine 1 %s, machine 2 %s (the root counted %d)", kept(files[0]), kept(files2[0]), n1+n2)
	if out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log2); code != 0 {
		t.Fatalf("store recover with proxy 2's log: exit %d, %s%s", code, out, errs)
	}
	p3 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(f.audited("p3", filepath.Join(f.e.Dir, "audit-3.log"))), Token: f.a})
	more, typ, detail := drain(t, p3.Connect(mcptest.SessionOptions{}), 40)
	total := n1 + n2 + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3}, total)
	if total > 30 || typ != string(gate.StoreReset) {
		t.Errorf("%d + %d calls alternating on two machines, the loss found right after (proxy 1 first), both proxies stopped cleanly; store recover with machine 2's log only; machine 1's proxy, which saw the root count %d at its last call, restarted: forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n1, n2, n1+n2-1, more, total, typ, detail)
	}
}

// R3-1. The index of the identity a machine saw at a store is named by
// the store's canonical address (lower-case host, default port and
// database, no trailing slash), and one written under another name of
// the server (localhost, its address) is found by the addresses it
// resolves to. A proxy makes 10 calls at redis://127.0.0.1:P/0 and stops;
// Redis restarts without persistence; the proxy restarted on the same
// machine (same state directory) with the URL spelled another way is
// refused store_reset: nothing more forwarded.
func TestE2EFaultSpellingAfterRestartWithoutPersistence(t *testing.T) {
	for _, c := range []struct{ name, from, to string }{
		{"default database left out", "/0?", "?"},
		{"trailing slash", "/0?", "/?"},
		{"localhost", "127.0.0.1", "localhost"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newStoreFleet(t)
			p1, s1 := f.start(f.a, "", nil)
			n, _, _ := drain(t, s1, 10)
			f.settled()
			stopProxy(t, p1)
			f.srv.RestartEmpty()
			pol := f.policy("")
			spelled := strings.Replace(pol.SpendStore, c.from, c.to, 1)
			if spelled == pol.SpendStore {
				t.Fatalf("%s has no %q", pol.SpendStore, c.from)
			}
			pol.SpendStore = spelled
			// Same machine: the same state directory (f.e.Dir/state).
			p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
			s2 := p2.Connect(mcptest.SessionOptions{})
			more, typ, detail := drain(t, s2, 40)
			total := n + more
			f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
			if total > 30 || typ != string(gate.StoreReset) {
				t.Errorf("%d calls, proxy stopped, Redis restarted without persistence; the proxy restarted on the same machine with the store spelled %s forwarded %d more (%d on 30), then %s: %s; want none, store_reset (the identity this machine saw is gone)", n, spelled, more, total, typ, detail)
			}
		})
	}
}

// R3-5. Two fleets (two roots) share a Redis, which is flushed. Fleet
// 1's proxy finds the loss of the whole store and marks it, so that every
// proxy started later, a new machine's included, refuses (checked).
// Fleet 1's operator runs store init --reset --root ROOT1, which accepts
// the loss of that root's tree only: the store-wide mark, the only record
// that fleet 2's tree (whose stamp the flush took) lost data too, is kept
// for every tree but ROOT1's (reset_rest, reset_except). Fleet 1 goes on;
// a new machine's proxy of fleet 2 is refused store_reset, nothing more
// forwarded.
func TestE2EFaultOneRootsInitKeepsTheStoreWideReset(t *testing.T) {
	f1 := newStoreFleet(t)
	f2 := f1.otherRoot()
	_, s1 := f1.start(f1.a, "", nil)
	p2, s2 := f2.start(f2.a, "", nil)
	drain(t, s1, 5)
	n2, _, _ := drain(t, s2, 10)
	f1.settled()
	f2.settled()
	stopProxy(t, p2) // fleet 2 idle (its stdio proxies run per session)
	f1.srv.FlushAll()
	typ, detail := denialData(s1.Call(t, "echo", map[string]any{"text": "fleet 1 after the flush"}))
	if typ != string(gate.StoreReset) {
		t.Fatalf("fleet 1 after the flush: %s: %s, want store_reset", typ, detail)
	}
	// Before any operator acts, a new machine's proxy of fleet 2 refuses.
	pc := f2.e.StartProxy(mcptest.ProxyOptions{Policy: f2.policy(""), Token: f2.a, Dir: t.TempDir()})
	if typ, detail := denialData(pc.Connect(mcptest.SessionOptions{}).Call(t, "echo", map[string]any{"text": "fleet 2, new machine, before"})); typ != string(gate.StoreReset) {
		t.Fatalf("a new machine's proxy of fleet 2 after fleet 1 found the flush: %s: %s, want store_reset", typ, detail)
	}
	stopProxy(t, pc)
	root1 := f1.e.Root.ID()
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f1.srv.URL(), "--reset", "--root", root1); code != 0 {
		t.Fatalf("store init --reset --root ROOT1: %d %s %s", code, out, errs)
	}
	if typ, detail := denialData(s1.Call(t, "echo", map[string]any{"text": "fleet 1 after its operator accepted"})); typ != "" {
		t.Fatalf("fleet 1 after store init --reset --root ROOT1: %s: %s, want it forwarded", typ, detail)
	}
	p3 := f2.e.StartProxy(mcptest.ProxyOptions{Policy: f2.policy(""), Token: f2.a, Dir: t.TempDir()})
	more, typ, detail := drain(t, p3.Connect(mcptest.SessionOptions{}), 40)
	total := n2 + more
	f2.sameAsUpstreams([]*mcptest.Process{p2, pc, p3}, total)
	if total > 30 || typ != string(gate.StoreReset) {
		t.Errorf("fleet 2 spent %d of 30, Redis flushed, fleet 1's proxy found it (store-wide reset), fleet 1's operator ran store init --reset --root %s; a new machine's proxy of fleet 2 forwarded %d more (%d on 30), then %s: %s; want store_reset (nobody accepted fleet 2's loss)", n2, root1, more, total, typ, detail)
	}
}

// R3-3. store recover on a store that lost its identity before any
// proxy noticed (the fleet stopped, Redis restarted without persistence,
// the operator recovers before starting the fleet again) gives the store
// a new identity; a proxy restarted on a machine that saw the store adopts
// it and keeps the counts the machine kept under the identity its index
// names (carrySeen). Two machines, 10 calls each; recover with machine
// 1's log only: machine 2's proxy, which saw the root count 20, is
// refused store_reset, nothing more forwarded.
func TestE2EFaultRecoverOfAForgottenStoreKeepsTheCounts(t *testing.T) {
	f := newStoreFleet(t)
	log1 := filepath.Join(f.e.Dir, "audit-1.log")
	log2 := filepath.Join(f.e.Dir, "audit-2.log")
	machine2 := t.TempDir()
	p1 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(f.audited("p1", log1)), Token: f.a})
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(f.audited("p2", log2)), Token: f.a, Dir: machine2})
	n1, _, _ := drain(t, p1.Connect(mcptest.SessionOptions{}), 10)
	n2, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
	f.settled()
	stopProxy(t, p1)
	stopProxy(t, p2)
	f.srv.RestartEmpty()
	if out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log1); code != 0 {
		t.Fatalf("store recover with proxy 1's log: exit %d, %s%s", code, out, errs)
	}
	// Machine 2's proxy, started again: it saw the root count n1+n2.
	p3 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(f.audited("p3", filepath.Join(f.e.Dir, "audit-3.log"))), Token: f.a, Dir: machine2})
	more, typ, detail := drain(t, p3.Connect(mcptest.SessionOptions{}), 40)
	total := n1 + n2 + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3}, total)
	if total > 30 || typ != string(gate.StoreReset) {
		t.Errorf("%d + %d calls on two machines, Redis restarted empty, store recover with machine 1's log only; machine 2's proxy, which saw the root count %d, restarted: forwarded %d more (%d on 30), then %s: %s; want none, store_reset (the rebuild is short of what it saw)", n1, n2, n1+n2, more, total, typ, detail)
	}
}

// R3-3, with no partial log: two fleets share a Redis; both stopped,
// Redis restarts empty, and fleet 1's operator accepts the loss of fleet
// 1's tree only (store init --reset --root ROOT1) before any proxy
// noticed. Fleet 2's proxy restarted on its machine keeps the counts it
// saw under the lost identity (its tree's loss no one accepted), and the
// store records that every other tree is still lost (reset_rest):
// store_reset, nothing more forwarded.
func TestE2EFaultInitRootOfAForgottenStoreKeepsTheOtherFleet(t *testing.T) {
	f1 := newStoreFleet(t)
	f2 := f1.otherRoot()
	p1, s1 := f1.start(f1.a, "", nil)
	p2, s2 := f2.start(f2.a, "", nil)
	drain(t, s1, 5)
	n2, _, _ := drain(t, s2, 10)
	f1.settled()
	f2.settled()
	stopProxy(t, p1)
	stopProxy(t, p2)
	f1.srv.RestartEmpty()
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f1.srv.URL(), "--reset", "--root", f1.e.Root.ID()); code != 0 {
		t.Fatalf("store init --reset --root ROOT1: %d %s %s", code, out, errs)
	}
	p3, s3 := f2.start(f2.a, "", nil) // fleet 2's machine (its state directory)
	more, typ, detail := drain(t, s3, 40)
	total := n2 + more
	f2.sameAsUpstreams([]*mcptest.Process{p2, p3}, total)
	if total > 30 || typ != string(gate.StoreReset) {
		t.Errorf("fleet 2 spent %d of 30; Redis restarted empty; fleet 1's operator ran store init --reset --root ROOT1; fleet 2's proxy restarted on its machine forwarded %d more (%d on 30), then %s: %s; want store_reset (nobody accepted fleet 2's loss, and its machine saw the tree)", n2, more, total, typ, detail)
	}
}

// R3-6. A proxy whose tree's stamp names another identity than its own
// (reserveScript's {8}) reads the store's identity first (storeChanged):
// when an operator has acted since its generation, it adopts the
// operator's generation and runs the reservation again, rather than mark
// the tree the operator just lifted. Only delegateos:store is deleted, a
// new machine's proxy gives the store a new identity and marks it reset,
// both proxies refuse, store init --reset lifts it: the new proxy
// forwards, then the old one's call and the new one's next call forward
// too.
func TestE2EFaultOldIdentityProxyAdoptsALiftedTree(t *testing.T) {
	f := newStoreFleet(t)
	_, s1 := f.start(f.a, "", nil)
	drain(t, s1, 5)
	f.settled()
	if err := f.srv.Client().Del(context.Background(), "delegateos:store").Err(); err != nil {
		t.Fatal(err)
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	s2 := p2.Connect(mcptest.SessionOptions{})
	for i, s := range []*mcptest.Session{s2, s1} {
		if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "identity gone"})); typ != string(gate.StoreReset) {
			t.Fatalf("proxy %d after delegateos:store was deleted: %s: %s; want store_reset", 2-i, typ, detail)
		}
	}
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset"); code != 0 {
		t.Fatalf("store init --reset: %d %s %s", code, out, errs)
	}
	if typ, detail := denialData(s2.Call(t, "echo", map[string]any{"text": "new machine after init --reset"})); typ != "" {
		t.Fatalf("the new machine's proxy after store init --reset: %s: %s; want it forwarded", typ, detail)
	}
	typ1, detail1 := denialData(s1.Call(t, "echo", map[string]any{"text": "old proxy after init --reset"}))
	typ2, detail2 := denialData(s2.Call(t, "echo", map[string]any{"text": "new machine, again"}))
	if typ1 != "" || typ2 != "" {
		t.Errorf("after store init --reset lifted the loss (the new machine's proxy forwarded): the old proxy's call: %s: %s; then the new machine's proxy: %s: %s; want both forwarded", typ1, detail1, typ2, detail2)
	}
}

// R3-6 through store recover: a running proxy, idle while Redis is
// flushed; the operator recovers at once with the proxy's (the fleet's
// only) audit log, which gives the store a new identity (it had none
// left). The proxy's next call finds its tree's stamp under that
// identity, adopts the recovery's generation and goes on: exactly the
// budget's rest is forwarded.
func TestE2EFaultRunningProxyAdoptsARecoveredTree(t *testing.T) {
	f := newStoreFleet(t)
	log1 := filepath.Join(f.e.Dir, "audit-1.log")
	p1 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(f.audited("p1", log1)), Token: f.a})
	s1 := p1.Connect(mcptest.SessionOptions{})
	n, _, _ := drain(t, s1, 10)
	f.settled()
	f.srv.FlushAll()
	if out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log1); code != 0 {
		t.Fatalf("store recover with the fleet's only log: exit %d, %s%s", code, out, errs)
	}
	more, typ, detail := drain(t, s1, 40)
	total := n + more
	f.sameAsUpstreams([]*mcptest.Process{p1}, total)
	if total != 30 {
		t.Errorf("%d calls, FLUSHALL, store recover with the fleet's only audit log: the running proxy forwarded %d more (%d on 30), then %s: %s; want exactly the 20 left", n, more, total, typ, detail)
	}
}

// R3-7. store init --reset --root with a root that names no delegation
// tree of the store (a typo, another fleet's root, the did:key of the
// wrong key) is refused, exit non-zero, naming the roots of the trees
// still marked reset, and changes nothing; the right root then lifts the
// tree.
func TestE2EFaultInitResetUnknownRootRefused(t *testing.T) {
	f := newStoreFleet(t)
	_, s := f.start(f.a, "", nil)
	drain(t, s, 5)
	f.settled()
	ctx := context.Background()
	c := f.srv.Client()
	keys, err := c.Keys(ctx, "delegateos:spend:{"+f.e.Root.ID()+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the tree's spend keys: %v %v", keys, err)
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after the DEL"})); typ != string(gate.StoreReset) {
		t.Fatalf("after the DEL: %s: %s; want store_reset", typ, detail)
	}
	other := mcptest.NewKey(t, "not-a-root")
	out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset", "--root", other.ID())
	typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after init --reset --root OTHER"}))
	if code == 0 || !strings.Contains(errs, "names no delegation tree") || !strings.Contains(errs, f.e.Root.ID()) || typ != string(gate.StoreReset) {
		t.Errorf("store init --reset --root %s (a root with no tree in the store): exit %d, %q%s; then the tree that lost data: %s: %s; want exit non-zero naming the root of the tree marked reset, the tree still refused", other.ID(), code, strings.TrimSpace(out), errs, typ, detail)
	}
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset", "--root", f.e.Root.ID()); code != 0 {
		t.Fatalf("store init --reset --root ROOT: %d %s %s", code, out, errs)
	}
	if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after init --reset --root ROOT"})); typ != "" {
		t.Errorf("after store init --reset --root ROOT: %s: %s; want it forwarded", typ, detail)
	}
}

// R3-4. The state directory's index of the identity a machine saw at a
// store (redis-HASH.json) cut short: the proxy refuses to start, naming
// the file and what to do with it (restore or remove it), without the
// advice for a Redis that is down or a wrong URL (a budget.StateError).
func TestE2EFaultCorruptIndexNamesItsRemedy(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	drain(t, s1, 5)
	f.settled()
	stopProxy(t, p1)
	idx, err := filepath.Glob(filepath.Join(f.e.Dir, "state", "redis-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cut []string
	for _, p := range idx {
		if strings.HasSuffix(p, ".seen.json") || strings.HasSuffix(p, ".ended.json") {
			continue
		}
		if err := os.WriteFile(p, []byte(`{"id":`), 0o600); err != nil {
			t.Fatal(err)
		}
		cut = append(cut, p)
	}
	if len(cut) == 0 {
		t.Fatalf("no index of the store's identity in the state directory: %v", idx)
	}
	msg := f.startRefused("on a cut index of the store's identity")
	if !strings.Contains(msg, "not a store identity") {
		t.Fatalf("the refusal does not name the index: %s", msg)
	}
	if strings.Contains(msg, "start Redis there or fix the URL") || (!strings.Contains(msg, "restore") && !strings.Contains(msg, "remove")) {
		t.Errorf("a cut index of the store's identity (%s): the proxy refuses to start saying %q: nothing to do about the file, and a remedy for a Redis that is down or a wrong URL, neither of which is the case", cut[0], strings.TrimSpace(msg))
	}
}

// R3-2 (third red team of issue 19). A call held for approval reserves
// its cost before it is held, which raises the root delegation's count of
// calls and the proxy's kept count with it; a declined approval releases
// the cost, not the count, and its decision in the audit log is a BLOCK.
// store recover counted allowed decisions only, so a recovery given every
// proxy's log rebuilt fewer calls than the proxy saw and was refused for
// ever ("run it again with every proxy's log"). It now counts a held
// call's refusal (and a waiting answer) as the counted, uncharged call it
// was: the recovery lifts the tree, the spend is exactly the forwarded
// calls', and the budget still binds.
func TestE2EFaultDeclinedApprovalsCountedByRecovery(t *testing.T) {
	f := newStoreFleet(t)
	logPath := filepath.Join(f.e.Dir, "audit-1.log")
	pol := f.policy(f.audited("p1", logPath))
	for i := range pol.Rules {
		if pol.Rules[i].Match == "echo" {
			pol.Rules[i].Approval = "required"
		}
	}
	a := &approver{answer: func(req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		if strings.Contains(req.Params.Message, "decline-me") {
			return answerWith(mcp.ElicitationResponseActionDecline, nil)
		}
		return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})
	}}
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s := p.Connect(mcptest.SessionOptions{Legacy: true, ClientOptions: []client.ClientOption{client.WithElicitationHandler(a)}})
	fwd, _, _ := drain(t, s, 5)
	for range 3 {
		if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "decline-me"})); typ != string(gate.ApprovalDeclined) {
			t.Fatalf("a declined call: %s: %s", typ, detail)
		}
	}
	m, _, _ := drain(t, s, 2)
	fwd += m
	f.settled()
	if u := f.usage()[f.key(1)]; u.Calls != fwd+3 {
		t.Fatalf("the root delegation counts %d calls, want the %d forwarded and the 3 declined", u.Calls, fwd)
	}
	want := fmt.Sprintf(":%d}", fwd+3)
	mcptest.Eventually(t, "the kept counts to hold "+want, func() bool {
		b, _ := os.ReadFile(f.seenFiles()[0])
		return strings.Contains(string(b), want)
	})
	f.srv.FlushAll()
	if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(gate.StoreReset) {
		t.Fatalf("after the flush: %s: %s, want store_reset", typ, detail)
	}
	stopProxy(t, p)
	if out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", logPath); code != 0 {
		t.Fatalf("store recover with the fleet's only audit log: exit %d, %s%s", code, out, errs)
	}
	if u := f.usage()[f.key(1)]; u.Calls != fwd+3 || u.Committed != fwd*fleetCost {
		t.Fatalf("rebuilt: %d calls, %d committed; want %d calls (the declined counted) and %d committed (only the forwarded)", u.Calls, u.Committed, fwd+3, fwd*fleetCost)
	}
	// The same machine's proxy, started again after the recovery, forwards,
	// and the budget binds at exactly 30 forwarded calls.
	pol.Extra = f.audited("p2", filepath.Join(f.e.Dir, "audit-2.log"))
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s2 := p2.Connect(mcptest.SessionOptions{Legacy: true, ClientOptions: []client.ClientOption{client.WithElicitationHandler(a)}})
	more, typ, detail := drain(t, s2, 40)
	if fwd+more != 30 || typ != "budget_exceeded" {
		t.Fatalf("after the recovery: %d more forwarded (%d in all), then %s: %s; want 30 in all, then budget_exceeded", more, fwd+more, typ, detail)
	}
}
