package attest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/identity"
)

// node makes an attestation with the given children, under the child
// contract (issued by alice) unless contractID is set.
func node(t *testing.T, k *identity.Keypair, id, contractID string, cost int64, children ...string) *Attestation {
	t.Helper()
	p := testParams()
	p.ID, p.CostMicrocents, p.Children = id, cost, children
	p.ContractID = childContractID
	if contractID != "" {
		p.ContractID = contractID
	}
	return create(t, k, p)
}

func wantChildrenDetail(t *testing.T, r *Report, want string) {
	t.Helper()
	s, _ := r.Step(StepChildren)
	if !strings.Contains(s.Detail, want) {
		t.Errorf("children step %q does not say %q", s.Detail, want)
	}
}

// alice did the root contract's work by delegating two sub-tasks under
// her own contract to bob and carol.
func TestVerifyRecursivePasses(t *testing.T) {
	w := newWorld(t)
	w.put(t, node(t, bobKey, idN("att_", 0xb), "", 700), node(t, carolKey, idN("att_", 0xc), "", 300))
	parent := node(t, aliceKey, idN("att_", 0xa), rootContractID, 1200, idN("att_", 0xb), idN("att_", 0xc))
	r, err := w.v.Verify(context.Background(), parent)
	wantVerdict(t, r, err, Passed)
	wantStep(t, r, StepChildren, StatusOK)
	if len(r.Children) != 2 || r.Children[0].Principal != bobKey.ID() || r.Children[1].Verdict != Passed {
		t.Errorf("children reports %+v", r.Children)
	}
}

func TestVerifyRecursiveOneBadChild(t *testing.T) {
	ctx := context.Background()
	good := node(t, bobKey, idN("att_", 0xb), "", 700)
	parent := node(t, aliceKey, idN("att_", 0xa), rootContractID, 1200, idN("att_", 0xb), idN("att_", 0xc))

	t.Run("tampered", func(t *testing.T) {
		bad := node(t, carolKey, idN("att_", 0xc), "", 300)
		bad.Result.CostMicrocents = 1
		w := newWorld(t)
		w.v.Attestations = &rawStore[*Attestation]{m: map[string]*Attestation{good.ID: good, bad.ID: bad}}
		r, err := w.v.Verify(ctx, parent)
		wantVerdict(t, r, err, Invalid)
		wantStep(t, r, StepChildren, StatusInvalid)
		wantChildrenDetail(t, r, "child att_00000000000c is invalid")
		if r.Children[1].Verdict != Invalid || r.Children[0].Verdict != Passed {
			t.Errorf("children %s, %s", r.Children[0].Verdict, r.Children[1].Verdict)
		}
	})
	t.Run("failed", func(t *testing.T) {
		p := testParams()
		p.ID, p.ContractID, p.CostMicrocents = idN("att_", 0xc), childContractID, 300
		p.Output = json.RawMessage(`{"summary":"short"}`)
		w := newWorld(t)
		w.put(t, good, create(t, carolKey, p))
		r, err := w.v.Verify(ctx, parent)
		wantVerdict(t, r, err, Failed)
		wantStep(t, r, StepChildren, StatusFailed)
	})
	t.Run("missing", func(t *testing.T) {
		w := newWorld(t)
		w.put(t, good)
		r, err := w.v.Verify(ctx, parent)
		wantVerdict(t, r, err, Invalid)
		wantChildrenDetail(t, r, "child att_00000000000c not found")
	})
	t.Run("unverifiable", func(t *testing.T) {
		w := newWorld(t)
		w.put(t, good)
		boom := errors.New("store offline")
		w.v.Attestations = &rawStore[*Attestation]{err: boom}
		r, err := w.v.Verify(ctx, parent)
		wantVerdict(t, r, err, Unverified)
		if !errors.Is(err, boom) {
			t.Errorf("error %v does not wrap the store's", err)
		}
	})
	t.Run("no store", func(t *testing.T) {
		w := newWorld(t)
		w.v.Attestations = nil
		r, err := w.v.Verify(ctx, parent)
		wantVerdict(t, r, err, Unverified)
	})
	t.Run("stored under another ID", func(t *testing.T) {
		w := newWorld(t)
		w.v.Attestations = &rawStore[*Attestation]{m: map[string]*Attestation{good.ID: good, idN("att_", 0xc): good}}
		r, err := w.v.Verify(ctx, parent)
		wantVerdict(t, r, err, Invalid)
	})
	t.Run("under a contract the parent did not issue", func(t *testing.T) {
		w := newWorld(t)
		w.put(t, good, node(t, carolKey, idN("att_", 0xc), rootContractID, 300))
		r, err := w.v.Verify(ctx, parent)
		wantVerdict(t, r, err, Invalid)
		wantChildrenDetail(t, r, "not by this attestation's principal")
		if r.Children[1].Verdict != Passed {
			t.Errorf("the child itself is %s, want passed: only the link is wrong", r.Children[1].Verdict)
		}
	})
}

// A parent's cost includes its children's, and must fit its budget.
func TestVerifyRecursiveCosts(t *testing.T) {
	tests := []struct {
		name         string
		parent, b, c int64
		verdict      Verdict
		budgetStep   Status
		detail       string
	}{
		{"children equal the parent", 1000, 700, 300, Passed, StatusOK, ""},
		{"children over the parent", 999, 700, 300, Invalid, StatusOK, "more than the 999 this attestation reports"},
		{"children over the budget", 5200, 2000, 2000 + 1200, Invalid, StatusInvalid, "over the contract's budget of 5000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			// carol's contract has a large budget so that only the parent's
			// limits are tested.
			big := makeContract(t, aliceKey, "ct_0000000000c2", 1<<40)
			w.contracts.Put(big)
			w.put(t, node(t, bobKey, idN("att_", 0xb), "", tt.b), node(t, carolKey, idN("att_", 0xc), big.ID, tt.c))
			r, err := w.v.Verify(context.Background(), node(t, aliceKey, idN("att_", 0xa), rootContractID, tt.parent, idN("att_", 0xb), idN("att_", 0xc)))
			wantVerdict(t, r, err, tt.verdict)
			wantStep(t, r, StepBudget, tt.budgetStep)
			if tt.detail != "" {
				wantChildrenDetail(t, r, tt.detail)
			}
		})
	}
}

// A cycle is found and refused; Verify returns.
func TestVerifyRecursiveCycle(t *testing.T) {
	w := newWorld(t)
	a, b := idN("att_", 0xa), idN("att_", 0xb)
	w.put(t, node(t, aliceKey, b, "", 0, a))
	root := node(t, aliceKey, a, "", 0, b)
	w.put(t, root)
	r, err := w.v.Verify(context.Background(), root)
	wantVerdict(t, r, err, Invalid)
	if len(r.Children) != 1 {
		t.Fatalf("%d children", len(r.Children))
	}
	wantChildrenDetail(t, r.Children[0], "child att_00000000000a appears twice")
}

// A child shared by two branches would be counted twice; it is refused.
func TestVerifyRecursiveSharedChild(t *testing.T) {
	w := newWorld(t)
	d := node(t, aliceKey, idN("att_", 0xd), "", 0)
	w.put(t, d, node(t, aliceKey, idN("att_", 0xb), "", 0, d.ID), node(t, aliceKey, idN("att_", 0xc), "", 0, d.ID))
	r, err := w.v.Verify(context.Background(), node(t, aliceKey, idN("att_", 0xa), "", 0, idN("att_", 0xb), idN("att_", 0xc)))
	wantVerdict(t, r, err, Invalid)
	wantChildrenDetail(t, r, "child att_00000000000c is invalid")
	wantChildrenDetail(t, r.Children[1], "appears twice")
}

// chain stores a chain of n attestations below a new root and returns the root.
func chain(t *testing.T, w *world, n int) *Attestation {
	var below []string
	for i := n; i >= 1; i-- {
		a := node(t, aliceKey, idN("att_", 0x100+i), "", 0, below...)
		w.put(t, a)
		below = []string{a.ID}
	}
	return node(t, aliceKey, idN("att_", 0x100), "", 0, below...)
}

func TestVerifyRecursiveDepth(t *testing.T) {
	w := newWorld(t)
	r, err := w.v.Verify(context.Background(), chain(t, w, MaxDepth))
	wantVerdict(t, r, err, Passed)

	w = newWorld(t)
	r, err = w.v.Verify(context.Background(), chain(t, w, MaxDepth+1))
	wantVerdict(t, r, err, Invalid)
	deepest := r
	for len(deepest.Children) > 0 {
		deepest = deepest.Children[0]
	}
	wantChildrenDetail(t, deepest, "nested more than")
}

func TestVerifyRecursiveTreeSize(t *testing.T) {
	w := newWorld(t)
	const fan = 4
	next := 0x1000
	var build func(level int) string
	build = func(level int) string {
		next++
		id := idN("att_", next)
		var kids []string
		if level < 4 {
			for range fan {
				kids = append(kids, build(level+1))
			}
		}
		w.put(t, node(t, aliceKey, id, "", 0, kids...))
		return id
	}
	var top []string
	for range fan {
		top = append(top, build(1))
	}
	// 1 + 4 + 16 + 64 + 256 attestations, more than MaxTreeSize.
	r, err := w.v.Verify(context.Background(), node(t, aliceKey, idN("att_", 1), "", 0, top...))
	wantVerdict(t, r, err, Invalid)
	if !strings.Contains(err.Error(), "invalid") {
		t.Error(err)
	}
	var count func(r *Report) int
	count = func(r *Report) int {
		n := 1
		for _, c := range r.Children {
			n += count(c)
		}
		return n
	}
	if n := count(r); n > MaxTreeSize {
		t.Errorf("%d attestations verified, over MaxTreeSize", n)
	}
	var said func(r *Report) bool
	said = func(r *Report) bool {
		if s, _ := r.Step(StepChildren); strings.Contains(s.Detail, "more than 256 attestations in the tree") {
			return true
		}
		for _, c := range r.Children {
			if said(c) {
				return true
			}
		}
		return false
	}
	if !said(r) {
		t.Error("no report says the tree is too large")
	}
}
