package reputation

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// selfOutcome is an outcome of a delegation from delegator to delegate
// that passed its verification.
func selfOutcome(delegator, delegate string, ancestors ...string) Outcome {
	return Outcome{
		DelegationID: "del_5e1f5e1f5e1f", Delegator: delegator, Delegate: delegate, Ancestors: ancestors,
		Title: "Rate my own work", Passed: true, VerificationScore: ptr(1.0),
		Created: t0, CompletedAt: t0.Add(time.Hour), Completeness: ptr(1.0), Clarity: ptr(1.0),
	}
}

// wantSelfDealing checks err is a *SelfDealingError with role, and that
// nothing was written: no profile for the agent, no contract file.
func wantSelfDealing(t *testing.T, w *Workspace, err error, role, agentDID string) {
	t.Helper()
	var sd *SelfDealingError
	if !errors.As(err, &sd) || !errors.Is(err, ErrSelfDealing) {
		t.Fatalf("err = %v, want a *SelfDealingError", err)
	}
	if sd.Role != role || sd.Delegate != agentDID {
		t.Fatalf("%+v, want role %s for %s", sd, role, agentDID)
	}
	if p, err := w.Profile(agentDID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the agent has a profile after a self-dealing evaluation: %+v, %v", p, err)
	}
}

// An agent that delegates to itself earns nothing from the outcome, however
// it names itself: principal ID or did:key, on either side.
func TestRecordOutcomeSelfDelegation(t *testing.T) {
	a := testKey(t, 7)
	for _, c := range []struct{ name, delegator, delegate string }{
		{"principal IDs", a.ID(), a.ID()},
		{"did:keys", a.DID(), a.DID()},
		{"principal ID and did:key", a.ID(), a.DID()},
		{"did:key and principal ID", a.DID(), a.ID()},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testWorkspace(t)
			c, signals, err := w.RecordOutcome(selfOutcome(c.delegator, c.delegate), t0.Add(time.Hour))
			if c != nil || signals != nil {
				t.Fatalf("contract %+v, signals %+v", c, signals)
			}
			wantSelfDealing(t, w, err, SelfDelegator, a.DID())
			if _, err := os.Stat(filepath.Join(w.Dir(), ContractsDir, "del-5e1f5e1f5e1f.md")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a contract was written: %v", err)
			}
		})
	}
}

// A delegates to B, B delegates back to A: A's authority comes from
// itself, so B's evaluation of A's work is A rating A. The same when A is
// the root issuer, or further up the chain, or named by its did:key there.
func TestRecordOutcomeDelegateIsAncestor(t *testing.T) {
	root, a, b, c := testKey(t, 1), testKey(t, 2), testKey(t, 3), testKey(t, 4)
	for _, tc := range []struct {
		name      string
		ancestors []string
		delegate  string
	}{
		{"A→B→A", []string{root.ID(), a.ID()}, a.ID()},
		{"root→B→root", []string{root.ID()}, root.ID()},
		{"A→C→B→A", []string{root.ID(), a.ID(), c.ID()}, a.ID()},
		{"ancestor as did:key", []string{root.DID(), a.DID()}, a.ID()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testWorkspace(t)
			_, signals, err := w.RecordOutcome(selfOutcome(b.ID(), tc.delegate, tc.ancestors...), t0.Add(time.Hour))
			if signals != nil {
				t.Fatalf("signals %+v", signals)
			}
			did, _ := CanonicalDID(tc.delegate)
			wantSelfDealing(t, w, err, SelfAncestor, did)
		})
	}
	// The delegator appearing twice in its own chain is no concern of the
	// delegate's: C earns from B's evaluation.
	w := testWorkspace(t)
	_, signals, err := w.RecordOutcome(selfOutcome(b.ID(), c.ID(), root.ID(), b.ID(), a.ID()), t0.Add(time.Hour))
	if err != nil || len(signals) != 1 || signals[0].Source != b.DID() {
		t.Fatalf("an honest chain: %+v, %v", signals, err)
	}
	// An ancestor that is not a principal is an error, not a pass.
	w = testWorkspace(t)
	if _, _, err := w.RecordOutcome(selfOutcome(b.ID(), c.ID(), "not-a-key"), t0.Add(time.Hour)); err == nil || errors.Is(err, ErrSelfDealing) {
		t.Fatalf("a bad ancestor: %v", err)
	}
}

// Evaluate refuses a contract whose delegate is its delegator, and an
// evaluation whose source is the delegate; the contract stays completed.
func TestEvaluateSelfDealing(t *testing.T) {
	a, b := testKey(t, 5), testKey(t, 6)
	scores := map[string]float64{Completeness: 1, Accuracy: 1, Clarity: 1, Timeliness: 1}
	completed := func(t *testing.T, w *Workspace, slug, delegator, delegate string) {
		t.Helper()
		if _, err := w.CreateContract(ContractParams{Slug: slug, Delegator: delegator, Delegate: delegate,
			Task: Task{Description: "self"}, Created: t0}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Activate(slug); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Complete(slug); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("delegator", func(t *testing.T) {
		w := testWorkspace(t)
		completed(t, w, "self", a.DID(), a.ID())
		for _, src := range []string{"", a.ID(), b.ID()} {
			_, signals, err := w.Evaluate("self", scores, src, t0.Add(time.Hour))
			if signals != nil {
				t.Fatalf("source %q: signals %+v", src, signals)
			}
			wantSelfDealing(t, w, err, SelfDelegator, a.DID())
		}
		if c, err := w.Contract("self"); err != nil || c.Status != Completed || c.Result != nil {
			t.Fatalf("%+v, %v", c, err)
		}
	})
	t.Run("evaluator", func(t *testing.T) {
		w := testWorkspace(t)
		completed(t, w, "work", b.ID(), a.ID())
		_, _, err := w.Evaluate("work", scores, a.DID(), t0.Add(time.Hour))
		wantSelfDealing(t, w, err, SelfEvaluator, a.DID())
		// The delegator's own evaluation goes through.
		c, signals, err := w.Evaluate("work", scores, "", t0.Add(time.Hour))
		if err != nil || c.Status != Evaluated || len(signals) != 1 || signals[0].Source != b.DID() {
			t.Fatalf("%+v %+v %v", c, signals, err)
		}
	})
	t.Run("other DIDs", func(t *testing.T) {
		// Agents named by DIDs this package cannot resolve are compared as
		// given.
		w := testWorkspace(t)
		writeWS(t, w, "reputation/web-agent.md", "---\nawp: \"0.4.0\"\nrdp: \"1.0\"\ntype: \"reputation-profile\"\nid: \"reputation:web-agent\"\n"+
			"agentDid: \"did:web:agent.example\"\nagentName: \"web agent\"\nlastUpdated: \"2026-02-15T10:30:00Z\"\nsignals: []\n---\n")
		completed(t, w, "web", "did:web:agent.example", "did:web:agent.example")
		_, _, err := w.Evaluate("web", scores, "", t0.Add(time.Hour))
		var sd *SelfDealingError
		if !errors.As(err, &sd) || sd.Role != SelfDelegator {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSameAgent(t *testing.T) {
	a, b := testKey(t, 8), testKey(t, 9)
	for _, c := range []struct {
		x, y string
		want bool
	}{
		{a.ID(), a.DID(), true},
		{a.DID(), a.ID(), true},
		{a.ID(), b.ID(), false},
		{"did:web:x", "did:web:x", true},
		{"did:web:x", "did:web:y", false},
		{"", "", false},
		{a.ID(), "", false},
	} {
		if got := SameAgent(c.x, c.y); got != c.want {
			t.Errorf("SameAgent(%q, %q) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
}
