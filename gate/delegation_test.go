package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/revocation"
)

// delegationFixture is a root, agent A and agent B, a root token for A
// and its attenuation to B, each bound to a contract its delegator signed.
type delegationFixture struct {
	t                   *testing.T
	now                 time.Time
	root, a, b, mallory *identity.Keypair
	aTok, bTok          *dct.Token
	aContract           *contract.TaskContract
	bContract           *contract.TaskContract
	d                   *Delegations
	spend               budget.Store
	revList             string
}

func fixtureKey(t *testing.T, b byte, name string) *identity.Keypair {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const summarySchema = `{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`

func newContract(t *testing.T, k *identity.Keypair, id string, now time.Time, budget int64, require ...string) *contract.TaskContract {
	t.Helper()
	c, err := contract.Create(k, contract.CreateParams{
		ID: id, Title: "Summarize", Description: "one paragraph",
		OutputSchema:        json.RawMessage(summarySchema),
		Verification:        json.RawMessage(`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":10}}`),
		MaxBudgetMicrocents: budget, Deadline: now.Add(time.Hour), MaxChainDepth: 1,
		RequiredCapabilities: require,
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newDelegationFixture(t *testing.T) *delegationFixture {
	t.Helper()
	f := &delegationFixture{t: t, now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	f.root, f.a, f.b, f.mallory = fixtureKey(t, 1, "root"), fixtureKey(t, 2, "a"), fixtureKey(t, 3, "b"), fixtureKey(t, 9, "mallory")
	var err error
	f.aTok, err = dct.Create(dct.CreateParams{
		Issuer: f.root, Delegatee: f.a.ID(),
		Capabilities: []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}},
		ContractID:   "ct_aaaaaaaaaaaa", DelegationID: "del_aaaaaaaaaaaa",
		MaxChainDepth: 2, MaxBudgetMicrocents: 10000, ExpiresAt: f.now.Add(2 * time.Hour), IssuedAt: f.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.bTok, err = dct.Attenuate(f.aTok, dct.AttenuateParams{
		Attenuator: f.a, Delegatee: f.b.ID(), DelegationID: "del_bbbbbbbbbbbb", ContractID: "ct_bbbbbbbbbbbb",
		Capabilities: &[]dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/sub/*"}}, Now: f.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.aContract = newContract(t, f.root, "ct_aaaaaaaaaaaa", f.now, 10000, "docs:read")
	f.bContract = newContract(t, f.a, "ct_bbbbbbbbbbbb", f.now, 5000, "docs:read")

	f.revList = filepath.Join(t.TempDir(), "revocations.json")
	if err := os.WriteFile(f.revList, []byte(`[]`), 0o600); err != nil {
		t.Fatal(err)
	}
	revs, err := revocation.OpenFile(f.revList)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dct.NewVerifier(dct.Options{Roots: []string{f.root.ID()}, Revocations: revs})
	if err != nil {
		t.Fatal(err)
	}
	contracts, atts := &contract.Memory{}, &attest.Memory{}
	f.spend = budget.NewMemory()
	clock := func() time.Time { return f.now }
	f.d = &Delegations{
		Verifier: v, Chain: chain.NewMemory(), Contracts: contracts, Attestations: atts,
		Attest:         &attest.Verifier{Contracts: contracts, Attestations: atts, Now: clock},
		Spent:          func(tok *dct.Token) int64 { return SpentUnder(f.spend, tok) },
		RevocationList: f.revList, Revocations: revs, Now: clock,
	}
	return f
}

func (f *delegationFixture) params(c *contract.TaskContract, tok *dct.Token, del, parent string) json.RawMessage {
	f.t.Helper()
	cb, err := json.Marshal(c)
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := json.Marshal(DelegateParams{Contract: cb, DCT: tok.String(), DCTFormat: dct.Format, DelegationID: del, ParentDelegationID: parent})
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *delegationFixture) delegateB() *Binding {
	f.t.Helper()
	res, bind, err := f.d.Delegate(f.params(f.bContract, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa"))
	if err != nil || !res.Accepted || bind == nil {
		f.t.Fatalf("delegate B: %+v %v", res, err)
	}
	return bind
}

func TestDelegateAccepts(t *testing.T) {
	f := newDelegationFixture(t)
	bind := f.delegateB()
	keys := f.bTok.DelegationKeys()
	if *bind != (Binding{Token: f.bTok.String(), ContractID: "ct_bbbbbbbbbbbb", DelegationID: "del_bbbbbbbbbbbb", DelegationKey: keys[len(keys)-1]}) {
		t.Errorf("binding = %+v", bind)
	}
	// The whole chain the token carries is recorded: A's delegation too.
	ds, err := f.d.Chain.List()
	if err != nil || len(ds) != 2 || ds[0].ID != "del_aaaaaaaaaaaa" || ds[1].ID != "del_bbbbbbbbbbbb" || ds[1].From != f.a.ID() || ds[1].To != f.b.ID() {
		t.Fatalf("chain = %+v, %v", ds, err)
	}
	if _, err := f.d.Contracts.Get("ct_bbbbbbbbbbbb"); err != nil {
		t.Errorf("contract not stored: %v", err)
	}
	// Sending it again (a reconnecting agent) is accepted; A's own
	// delegation, an ancestor already recorded, can be delegated too.
	if res, _, err := f.d.Delegate(f.params(f.bContract, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa")); err != nil || !res.Accepted {
		t.Errorf("repeat: %+v %v", res, err)
	}
	if res, _, err := f.d.Delegate(f.params(f.aContract, f.aTok, "del_aaaaaaaaaaaa", dct.RootParentDelegationID)); err != nil || !res.Accepted {
		t.Errorf("root: %+v %v", res, err)
	}
}

func TestDelegateRejects(t *testing.T) {
	f := newDelegationFixture(t)
	other := newContract(t, f.a, "ct_cccccccccccc", f.now, 5000, "docs:read")
	needsWrite := newContract(t, f.a, "ct_bbbbbbbbbbbb", f.now, 5000, "docs:write")
	byMallory := newContract(t, f.mallory, "ct_bbbbbbbbbbbb", f.now, 5000, "docs:read")
	byRoot := newContract(t, f.root, "ct_bbbbbbbbbbbb", f.now, 5000, "docs:read")
	tampered := *f.bContract
	tampered.Constraints.MaxBudgetMicrocents = 1 << 40
	untrusted, err := dct.Create(dct.CreateParams{Issuer: f.mallory, Delegatee: f.b.ID(),
		Capabilities: []dct.Capability{{Namespace: "docs", Action: "read", Resource: "**"}},
		ContractID:   "ct_bbbbbbbbbbbb", DelegationID: "del_bbbbbbbbbbbb", MaxChainDepth: 1, MaxBudgetMicrocents: 1, ExpiresAt: f.now.Add(time.Hour), IssuedAt: f.now})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		params json.RawMessage
		reason string
	}{
		{"contract bound to another ID", f.params(other, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa"), RejectContractMismatch},
		{"capability not granted", f.params(needsWrite, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa"), RejectCapabilityMismatch},
		{"contract not by the delegator", f.params(byMallory, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa"), RejectContractMismatch},
		{"contract by the root, not the delegator", f.params(byRoot, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa"), RejectInvalidContract},
		{"tampered contract", f.params(&tampered, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa"), RejectInvalidContract},
		{"untrusted root", f.params(f.bContract, untrusted, "del_bbbbbbbbbbbb", dct.RootParentDelegationID), RejectInvalidToken},
		{"wrong delegation ID", f.params(f.bContract, f.bTok, "del_cccccccccccc", "del_aaaaaaaaaaaa"), RejectDelegationMismatch},
		{"wrong parent", f.params(f.bContract, f.bTok, "del_bbbbbbbbbbbb", dct.RootParentDelegationID), RejectDelegationMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, bind, err := f.d.Delegate(tt.params)
			if err != nil || res.Accepted || bind != nil || res.Reason != tt.reason {
				t.Fatalf("got %+v %v %v, want a %s reject", res, bind, err, tt.reason)
			}
			if res.Details == "" {
				t.Error("a reject without details")
			}
		})
	}
	if ds, _ := f.d.Chain.List(); len(ds) != 0 {
		t.Errorf("a rejected delegation was recorded: %+v", ds)
	}

	// Expired contract.
	f.now = f.now.Add(90 * time.Minute)
	if res, _, _ := f.d.Delegate(f.params(f.bContract, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa")); res.Accepted || res.Reason != RejectInvalidContract {
		t.Errorf("past the deadline: %+v", res)
	}
	f.now = f.now.Add(-90 * time.Minute)

	// Trust gate.
	f.d.Trust = func(string, time.Time) (bool, string, error) { return false, "reliability 0.20 below 0.50", nil }
	if res, _, _ := f.d.Delegate(f.params(f.bContract, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa")); res.Accepted || res.Reason != RejectUntrusted {
		t.Errorf("trust gate: %+v", res)
	}
	f.d.Trust = nil

	// Malformed params are a JSON-RPC error, not a reject.
	for _, p := range []string{`{}`, `{"contract":{},"dct":"x","dctFormat":"other","delegationId":"d","parentDelegationId":"p"}`, `{"dct":"x","extra":1}`, `[]`} {
		if _, _, err := f.d.Delegate(json.RawMessage(p)); err == nil {
			t.Errorf("Delegate(%s) gave no error", p)
		}
	}
}

func (f *delegationFixture) attestation(k *identity.Keypair, del, ct string, output string, cost int64) json.RawMessage {
	f.t.Helper()
	a, err := attest.Create(k, attest.CreateParams{ContractID: ct, DelegationID: del, Success: true,
		Output: json.RawMessage(output), CostMicrocents: cost, DurationMs: 10}, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	ab, err := json.Marshal(a)
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := json.Marshal(CompleteParams{DelegationID: del, Attestation: ab})
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func TestCompleteRecordsOutcome(t *testing.T) {
	f := newDelegationFixture(t)
	f.delegateB()
	var outcomes []Outcome
	f.d.OnOutcome = func(o Outcome) error { outcomes = append(outcomes, o); return nil }

	// Someone else's attestation, or one for another delegation, is refused
	// and records nothing.
	for _, p := range []json.RawMessage{
		f.attestation(f.mallory, "del_bbbbbbbbbbbb", "ct_bbbbbbbbbbbb", `{"summary":"a long enough summary"}`, 10),
		f.attestation(f.b, "del_bbbbbbbbbbbb", "ct_aaaaaaaaaaaa", `{"summary":"a long enough summary"}`, 10),
		f.attestation(f.b, "del_cccccccccccc", "ct_bbbbbbbbbbbb", `{"summary":"a long enough summary"}`, 10),
	} {
		if _, err := f.d.Complete(context.Background(), p); err == nil {
			t.Errorf("accepted %s", p)
		}
	}

	res, err := f.d.Complete(context.Background(), f.attestation(f.b, "del_bbbbbbbbbbbb", "ct_bbbbbbbbbbbb", `{"summary":"a long enough summary"}`, 10))
	if err != nil || res.Status != "completed" || !res.Verified || res.Score == nil || *res.Score != 1 {
		t.Fatalf("complete: %+v %v", res, err)
	}
	del, _ := f.d.Chain.Get("del_bbbbbbbbbbbb")
	if del.Status != chain.StatusCompleted || del.AttestationID != res.AttestationID {
		t.Errorf("chain: %+v", del)
	}
	if _, err := f.d.Attestations.Get(res.AttestationID); err != nil {
		t.Errorf("attestation not stored: %v", err)
	}
	if len(outcomes) != 1 || !outcomes[0].Passed || outcomes[0].Delegation.To != f.b.ID() {
		t.Errorf("outcomes = %+v", outcomes)
	}
	// An ended delegation cannot be completed again.
	if _, err := f.d.Complete(context.Background(), f.attestation(f.b, "del_bbbbbbbbbbbb", "ct_bbbbbbbbbbbb", `{"summary":"a long enough summary"}`, 10)); err == nil {
		t.Error("completed twice")
	}
}

func TestCompleteFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		output  string
		cost    int64
		spent   int64
		problem string
	}{
		"output fails verification":       {`{"summary":"short"}`, 10, 0, "verification"},
		"output fails the schema":         {`{"text":"a long enough text"}`, 10, 0, "output_schema"},
		"cost over the contract's budget": {`{"summary":"a long enough summary"}`, 5001, 0, "budget"},
		"cost below what was spent":       {`{"summary":"a long enough summary"}`, 10, 300, "the proxy recorded 300 spent"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newDelegationFixture(t)
			f.delegateB()
			if tc.spent > 0 {
				scope, err := f.d.Verifier.VerifyChain(f.bTok.String(), f.now)
				if err != nil {
					t.Fatal(err)
				}
				r, err := f.spend.Reserve(BudgetLevels(scope), tc.spent)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.spend.Commit(r, tc.spent); err != nil {
					t.Fatal(err)
				}
			}
			var outcome *Outcome
			f.d.OnOutcome = func(o Outcome) error { outcome = &o; return errors.New("workspace full") }
			res, err := f.d.Complete(context.Background(), f.attestation(f.b, "del_bbbbbbbbbbbb", "ct_bbbbbbbbbbbb", tc.output, tc.cost))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != "failed" || res.Verified || !strings.Contains(strings.Join(res.Problems, "\n"), tc.problem) {
				t.Fatalf("got %+v, want failed with a %q problem", res, tc.problem)
			}
			if del, _ := f.d.Chain.Get("del_bbbbbbbbbbbb"); del.Status != chain.StatusFailed {
				t.Errorf("chain status %s", del.Status)
			}
			if outcome == nil || outcome.Passed {
				t.Errorf("outcome %+v", outcome)
			}
			if !strings.Contains(strings.Join(res.Problems, "\n"), "reputation: the outcome was not recorded: workspace full") {
				t.Errorf("the outcome hook's error is not reported: %v", res.Problems)
			}
		})
	}
}

func TestRevokeMessage(t *testing.T) {
	f := newDelegationFixture(t)
	f.delegateB()
	bID := f.bTok.RevocationIDs()[1]
	entry := func(k *identity.Keypair, id string) json.RawMessage {
		e, err := revocation.NewEntry(k, id, revocation.ScopeChain, f.now)
		if err != nil {
			t.Fatal(err)
		}
		eb, _ := json.Marshal(e)
		b, _ := json.Marshal(RevokeParams{Revocation: eb})
		return b
	}
	// B cannot revoke what A issued it: the verifier would ignore the
	// entry, so it is refused and not stored.
	if res, err := f.d.Revoke(entry(f.b, bID)); err == nil {
		t.Fatalf("revoke by B accepted: %+v", res)
	}
	if _, err := f.d.Verifier.VerifyChain(f.bTok.String(), f.now); err != nil {
		t.Fatalf("B's own revocation took effect: %v", err)
	}
	// A can: the revocation is in force at once and the chain shows it.
	res, err := f.d.Revoke(entry(f.a, bID))
	if err != nil || res.RevocationID != bID || len(res.Delegations) != 1 || res.Delegations[0] != "del_bbbbbbbbbbbb" {
		t.Fatalf("revoke by A: %+v %v", res, err)
	}
	if _, err := f.d.Verifier.VerifyChain(f.bTok.String(), f.now); err == nil {
		t.Fatal("the revoked token still verifies")
	}
	if del, _ := f.d.Chain.Get("del_bbbbbbbbbbbb"); del.Status != chain.StatusRevoked {
		t.Errorf("chain status %s", del.Status)
	}
	// A bad signature is refused and not stored.
	var e revocation.Entry
	_ = json.Unmarshal(mustField(t, entry(f.a, bID), "revocation"), &e)
	e.Scope = revocation.ScopeBlock
	eb, _ := json.Marshal(e)
	bad, _ := json.Marshal(RevokeParams{Revocation: eb})
	if _, err := f.d.Revoke(bad); err == nil {
		t.Error("a tampered entry was accepted")
	}
	l, err := revocation.Load(f.revList)
	if err != nil || l.Len() != 1 {
		t.Errorf("list has %v entries, %v; want 1", l, err)
	}
}

func mustField(t *testing.T, raw json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}

// SpentUnder reads the key the gate charges.
func TestSpentUnderMatchesGate(t *testing.T) {
	f := newDelegationFixture(t)
	scope, err := f.d.Verifier.VerifyChain(f.bTok.String(), f.now)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.spend.Reserve(BudgetLevels(scope), 42)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.spend.Commit(r, 42); err != nil {
		t.Fatal(err)
	}
	if got := SpentUnder(f.spend, f.bTok); got != 42 {
		t.Errorf("SpentUnder(B) = %d, want 42", got)
	}
	if got := SpentUnder(f.spend, f.aTok); got != 42 {
		t.Errorf("SpentUnder(A) = %d, want 42 (B's spend counts against its parent)", got)
	}
}
