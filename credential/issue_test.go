package credential

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
)

func testKey(seed byte) ed25519.PrivateKey {
	s := make([]byte, 32)
	for i := range s {
		s[i] = seed
	}
	return ed25519.NewKeyFromSeed(s)
}

func didOf(k ed25519.PrivateKey) string {
	return identity.DIDFromPublicKey(k.Public().(ed25519.PublicKey))
}

var issueAt = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func testReceipt(t *testing.T, issuer ed25519.PrivateKey) []byte {
	t.Helper()
	passed, sc := true, 0.875
	d := DelegationReceipt{
		Delegator: didOf(issuer), Delegatee: didOf(testKey(2)),
		DelegationID: "del_b0b000000001", ContractID: "ct_b0b000000001", AttestationID: "att_0123456789ab",
		Purpose: "Summarize the notes", Categories: []string{"docs:read"},
		BudgetMicrocents: 50000, CostMicrocents: 1000, Outcome: "completed", CompletedAt: issueAt.Add(-time.Hour),
		VerificationPassed: &passed, VerificationScore: &sc,
	}
	b, err := IssueDelegationReceipt(issuer, d, Window{issueAt, issueAt.Add(365 * 24 * time.Hour)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIssueDelegationReceipt(t *testing.T) {
	k := testKey(1)
	b := testReceipt(t, k)
	r, err := Verify(b, VerifyOptions{Now: issueAt.Add(time.Minute), Signer: didOf(k)})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IssuerIsSigner || r.Construction != W3C || !contains(r.Types, TypeAgentDelegation) {
		t.Errorf("result %+v", r)
	}
	var subj map[string]any
	if err := json.Unmarshal(r.Subject, &subj); err != nil {
		t.Fatal(err)
	}
	if subj["contractId"] != "ct_b0b000000001" || subj["costMicrocents"] != 1000.0 || subj["outcome"] != "completed" ||
		subj["delegator"] != didOf(k) || subj["attestationId"] != "att_0123456789ab" || subj["verificationScore"] != 0.875 {
		t.Errorf("subject %s", r.Subject)
	}
	if last := r.Checks[len(r.Checks)-1]; last.Name != "delegation receipt" {
		t.Errorf("the AVP rules were not checked: %+v", r.Checks)
	}
	// Issued by a key, verified as by another: refused.
	if _, err := Verify(b, VerifyOptions{Now: issueAt, Signer: didOf(testKey(3))}); !isKind(err, ErrUntrustedSigner) {
		t.Errorf("another signer: %v", err)
	}
	t.Logf("%d one-field tampers rejected", tamperEach(t, b, VerifyOptions{Now: issueAt.Add(time.Minute)}))
}

func TestIssueReputation(t *testing.T) {
	k := testKey(4)
	rep := Reputation{Agent: didOf(testKey(5)), AgentName: "bot", Profile: "reputation:key-abc", At: issueAt,
		Dimensions: []Score{{Name: "reliability", Score: 0.95, Confidence: 0.09, SampleSize: 1, LastSignal: issueAt.Add(-time.Hour)}},
		Domains:    []Score{{Name: "ai-research", Score: 0.8, Confidence: 0.09, SampleSize: 1, LastSignal: issueAt.Add(-time.Hour)}}}
	b, err := IssueReputation(k, rep, Window{issueAt, issueAt.Add(24 * time.Hour)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Verify(b, VerifyOptions{Now: issueAt})
	if err != nil {
		t.Fatal(err)
	}
	if !contains(r.Types, TypeReputation) || r.Signer != didOf(k) {
		t.Errorf("result %+v", r)
	}
	if _, err := Verify(b, VerifyOptions{Now: issueAt.Add(25 * time.Hour)}); !isKind(err, ErrExpired) {
		t.Errorf("after validUntil: %v", err)
	}
	t.Logf("%d one-field tampers rejected", tamperEach(t, b, VerifyOptions{Now: issueAt}))
	for _, bad := range []float64{-0.1, 1.5} {
		rep.Dimensions[0].Score = bad
		if _, err := IssueReputation(k, rep, Window{issueAt, issueAt.Add(time.Hour)}, nil); err == nil {
			t.Errorf("score %v issued", bad)
		}
	}
}

func TestIssueRefuses(t *testing.T) {
	k := testKey(1)
	good := DelegationReceipt{Delegator: didOf(k), Delegatee: didOf(testKey(2)), Outcome: "completed", CompletedAt: issueAt}
	w := Window{issueAt, issueAt.Add(time.Hour)}
	if _, err := IssueDelegationReceipt(k, good, w, nil); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(d *DelegationReceipt, w *Window){
		"outcome":   func(d *DelegationReceipt, w *Window) { d.Outcome = "active" },
		"delegatee": func(d *DelegationReceipt, w *Window) { d.Delegatee = "did:web:x" },
		"cost":      func(d *DelegationReceipt, w *Window) { d.CostMicrocents = -1 },
		"window":    func(d *DelegationReceipt, w *Window) { w.ValidUntil = w.ValidFrom },
		"category":  func(d *DelegationReceipt, w *Window) { d.Categories = []string{""} },
	} {
		d, w2 := good, w
		f(&d, &w2)
		if _, err := IssueDelegationReceipt(k, d, w2, nil); err == nil {
			t.Errorf("%s: issued", name)
		}
	}
}
