package gate

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/redistest"
	"github.com/delegateos/delegateos/policy"
)

// reloadFixture is a rate fixture's gate held by a Current, with a closer
// that counts its calls.
func reloadFixture(t testing.TB, yaml string) (*rateFixture, *Current, *atomic.Int32) {
	t.Helper()
	f := newRateFixture(t, yaml)
	var closed atomic.Int32
	s := &Snapshot{Policy: f.gate.Policy, Gate: f.gate, closers: []func(){func() { closed.Add(1) }}}
	return f, NewCurrent(s), &closed
}

func (f *rateFixture) policy(t testing.TB, yaml string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte("roots: ["+f.gate.Policy.Roots[0]+"]\n"+yaml), "/d")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A reload keeps the budget and the rate windows (both in memory here),
// the clock and the hooks; a reservation made before it settles after it
// in the same store; the stores are released once, by the last snapshot.
func TestReloadKeepsStores(t *testing.T) {
	f, cur, closed := reloadFixture(t, "rate: 3/1m\ndefault_cost: 10\n")
	var observed atomic.Int32
	f.gate.Observer = countObserver{&observed}
	old := cur.Load()
	f.call(t, echo(f.root))
	f.call(t, echo(f.root))
	held := old.Gate.Decide(echo(f.root)) // in flight across the reload
	wantAllowed(t, held, "third call")
	s, err := cur.Reload(f.policy(t, "rate: 3/1m\ndefault_cost: 100\n"), Options{PolicyDigest: "abc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Load() != s || s.PolicyDigest != "abc" || s.Gate.Budget != old.Gate.Budget || s.Gate.Now == nil || s.Gate.Observer == nil {
		t.Fatalf("reloaded snapshot %+v, gate %+v", s, s.Gate)
	}
	if _, err := old.Gate.Settle(&held, held.Call.Cost, false); err != nil {
		t.Fatal(err)
	}
	f.gate = s.Gate
	wantLimited(t, f.call(t, echo(f.root)), "fourth call, after the reload", -1)
	if spent := s.Gate.Budget.Spent(BudgetLevels(f.scope(t, f.root))[0].Key); spent != 30 {
		t.Errorf("spent %d after the reload; want 30 (three calls at the old cost)", spent)
	}
	old.Close()
	if closed.Load() != 0 {
		t.Fatal("closing the old snapshot released the stores the new one uses")
	}
	cur.Close()
	if closed.Load() != 1 {
		t.Fatalf("stores released %d times; want once", closed.Load())
	}
	if observed.Load() == 0 {
		t.Error("the observer was not carried over")
	}
}

type countObserver struct{ n *atomic.Int32 }

func (o countObserver) Decided(*CallRequest, *Decision) { o.n.Add(1) }
func (o countObserver) Settled(SettledCall)             {}

// Every setting a running front cannot follow is refused with its name,
// and the snapshot in force stays; so is a commit that fails.
func TestReloadRefusesFixedSettings(t *testing.T) {
	f, cur, _ := reloadFixture(t, "rate: 3/1m\n")
	before := cur.Load()
	for _, c := range []struct{ yaml, why string }{
		{"rate: 4/1m\n", "rate limits changed"},
		{"rate: 3/1m\nspend_store: /x/spend.db\n", "spend_store changed"},
		{"rate: 3/1m\nrevocation_list: /x/r.json\n", "revocation_list changed"},
		{"rate: 3/1m\nworkspace: /x/ws\n", "workspace changed"},
		{"rate: 3/1m\naudit_log: /x/a.log\nproxy_key: /x/k\n", "proxy_key changed"},
		{"rate: 3/1m\naudit_log: /x/a.log\n", "audit_log changed"},
		{"rate: 3/1m\nmax_frame_bytes: 2048\n", "max_frame_bytes changed"},
		{"rate: 3/1m\nallow_unauthenticated: true\n", "allow_unauthenticated changed"},
		{"rate: 3/1m\ntool_pins: /x/pins.json\n", "tool_pins changed"},
	} {
		_, err := cur.Reload(f.policy(t, c.yaml), Options{}, nil)
		var re *ReloadError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%q: %v; want a ReloadError saying %q", c.yaml, err, c.why)
		}
	}
	noRoots, err := policy.Parse([]byte("rate: 3/1m\n"), "/d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cur.Reload(noRoots, Options{}, nil); err == nil || !strings.Contains(err.Error(), "no trusted roots") {
		t.Errorf("no roots: %v", err)
	}
	failed := errors.New("the audit log cannot be written")
	if _, err := cur.Reload(f.policy(t, "rate: 3/1m\ndefault_cost: 5\n"), Options{}, func(*Snapshot) error { return failed }); !errors.Is(err, failed) {
		t.Errorf("a failed commit: %v", err)
	}
	if cur.Load() != before || before.closers == nil {
		t.Fatal("a refused reload changed the snapshot in force")
	}
}

// Reloads from several goroutines while others decide and settle: every
// decision is made by a whole snapshot, the rate windows are one, and the
// budget is charged exactly once per allowed call (run with -race).
func TestReloadConcurrent(t *testing.T) {
	f, cur, closed := reloadFixture(t, "rate: 1000/1h\ndefault_cost: 1\n")
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				g := cur.Load().Gate
				d := g.Decide(echo(f.root))
				if d.Allowed {
					if _, err := g.Settle(&d, d.Call.Cost, false); err != nil {
						t.Error(err)
						return
					}
					allowed.Add(1)
				}
			}
		}()
	}
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := cur.Reload(f.policy(t, "rate: 1000/1h\ndefault_cost: 1\n"), Options{PolicyDigest: strings.Repeat("a", i+1)}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if spent := cur.Load().Gate.Budget.Spent(BudgetLevels(f.scope(t, f.root))[0].Key); spent != allowed.Load() || spent == 0 {
		t.Errorf("spent %d; %d calls were allowed", spent, allowed.Load())
	}
	cur.Close()
	if closed.Load() != 1 {
		t.Errorf("stores released %d times; want once", closed.Load())
	}
}

// BenchmarkReload is the cost of a reload once the policy is read: the
// checks, a new Gate over the kept stores, and the swap.
func BenchmarkReload(b *testing.B) {
	f, cur, _ := reloadFixture(b, "rate: 3/1m\n")
	pol := f.policy(b, "rate: 3/1m\ndefault_cost: 7\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cur.Reload(pol, Options{}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// A reload while the revocation list's Redis is down is refused (the list
// cannot be read again), the snapshot in force stays, and the same reload
// is applied once Redis is back.
func TestReloadRevocationStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	root := "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w"
	pol := func(cost int64) *policy.Policy {
		return &policy.Policy{Roots: []string{root}, RevocationList: srv.URL(), DefaultCost: cost}
	}
	s, err := Open(pol(1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cur := NewCurrent(s)
	defer cur.Close()
	srv.Stop()
	var re *ReloadError
	if _, err := cur.Reload(pol(2), Options{}, nil); !errors.As(err, &re) || !strings.Contains(err.Error(), "cannot be read now") {
		t.Fatalf("reload with Redis down: %v", err)
	}
	if cur.Load() != s {
		t.Fatal("a refused reload changed the snapshot in force")
	}
	srv.Restart()
	if _, err := cur.Reload(pol(2), Options{}, nil); err != nil {
		t.Fatalf("reload with Redis back: %v", err)
	}
	if cur.Load().Policy.DefaultCost != 2 {
		t.Fatal("the reload was not applied")
	}
}

// Roots may change with a workspace: the delegation messages verify with
// the roots in force from the swap on, the gate's and theirs alike.
func TestReloadRootsWithWorkspace(t *testing.T) {
	a, b := testKey(t, 7, "a"), testKey(t, 8, "b")
	dir := t.TempDir()
	pol := func(roots ...string) *policy.Policy {
		return &policy.Policy{Roots: roots, Workspace: filepath.Join(dir, "ws")}
	}
	s, err := Open(pol(a.ID()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cur := NewCurrent(s)
	defer cur.Close()
	now := time.Now()
	tok, err := dct.Create(dct.CreateParams{Issuer: b, Delegatee: a.ID(), Capabilities: []dct.Capability{{Namespace: "*", Action: "*", Resource: "*"}},
		ContractID: "ct_roots", DelegationID: "del_roots", MaxChainDepth: 1, MaxBudgetMicrocents: 10, IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delegations.verifier().VerifyChain(tok.String(), now); err == nil {
		t.Fatal("a token of an untrusted root verified")
	}
	n, err := cur.Reload(pol(a.ID(), b.ID()), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.Delegations != s.Delegations {
		t.Fatal("the workspace's delegations were opened again")
	}
	for what, v := range map[string]*dct.Verifier{"the gate": n.Gate.Verifier, "the delegation messages": n.Delegations.verifier()} {
		if _, err := v.VerifyChain(tok.String(), now); err != nil {
			t.Errorf("%s after adding the root: %v", what, err)
		}
	}
}

func testKey(t testing.TB, b byte, name string) *identity.Keypair {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A refusal names the policy file's key of the field that changed.
func TestPolicyKey(t *testing.T) {
	for field, key := range map[string]string{"SpendStore": "spend_store", "MaxFrameBytes": "max_frame_bytes", "LDP": "ldp", "Log": "log", "ToolPins": "tool_pins"} {
		if got := policyKey(field); got != key {
			t.Errorf("policyKey(%s) = %s, want %s", field, got, key)
		}
	}
}

// A reload does not touch the spend store: one while the store's Redis is
// down applies, and keeps the same store (whose calls are refused until
// it is back, as before the reload).
func TestReloadSpendStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	root := "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w"
	pol := func(cost int64) *policy.Policy {
		return &policy.Policy{Roots: []string{root}, SpendStore: srv.URL(), DefaultCost: cost}
	}
	s, err := Open(pol(1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cur := NewCurrent(s)
	defer cur.Close()
	srv.Stop()
	n, err := cur.Reload(pol(2), Options{}, nil)
	if err != nil {
		t.Fatalf("reload with the spend store down: %v", err)
	}
	if n.Gate.Budget != s.Gate.Budget {
		t.Fatal("the spend store was opened again")
	}
}
