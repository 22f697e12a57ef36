package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
)

// TestCredentialIssueRefusesContractNotByDelegator: a contract file in the
// workspace replaced by one the delegatee signed, under the same ID, must
// not put the delegatee's title and categories (the receipt's scope) under
// the delegator's signature.
func TestCredentialIssueRefusesContractNotByDelegator(t *testing.T) {
	dir := t.TempDir()
	_, bob := receiptWorkspace(t, dir)
	ws := filepath.Join(dir, "ws")
	cs, err := contract.OpenDir(filepath.Join(ws, wsTaskContracts))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Add(-time.Minute)
	forged, err := contract.Create(bob, contract.CreateParams{
		ID: "ct_b0b000000001", Title: "Move the treasury",
		OutputSchema: json.RawMessage(`{"type":"object"}`), Verification: json.RawMessage(`{"method":"schema_match","schema":{"type":"object"}}`),
		MaxBudgetMicrocents: 9000000, Deadline: now.Add(time.Hour), MaxChainDepth: 1, RequiredCapabilities: []string{"payments:send"},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	path, err := cs.Path(forged.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := cs.Put(forged); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, dir, "credential", "issue", "--key", "alice.key", "--kind", "delegation",
		"--workspace", "ws", "--delegation", "del_b0b000000001")
	if code != 1 || !strings.Contains(stderr, "not by the delegator") || strings.Contains(stdout, "payments:send") {
		t.Fatalf("issue under a contract bob signed: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestCredentialIssueRefusesForgedDelegation: a delegation recorded in the
// workspace's chain log whose token claims the delegator as issuer but was
// not signed by the delegator must not get a receipt signed by the
// delegator.
func TestCredentialIssueRefusesForgedDelegation(t *testing.T) {
	dir := t.TempDir()
	alice, bob := receiptWorkspace(t, dir)
	ws := filepath.Join(dir, "ws")
	now := time.Now().UTC().Add(-time.Minute)
	cap, err := dct.ParseCapability("docs:read:/project/**")
	if err != nil {
		t.Fatal(err)
	}
	// bob signs a root token to himself, then names alice as its issuer.
	tok, err := dct.Create(dct.CreateParams{Issuer: bob, Delegatee: bob.ID(), Capabilities: []dct.Capability{cap},
		ContractID: "ct_b0b000000001", DelegationID: "del_f0f000000001", MaxChainDepth: 1, MaxBudgetMicrocents: 50000, ExpiresAt: now.Add(time.Hour), IssuedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b64.Decode(tok.String())
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	st["authority"].(map[string]any)["issuer"] = alice.ID()
	st["signatures"].([]any)[0].(map[string]any)["signer"] = alice.ID()
	j, _ := json.Marshal(st)
	if j, err = jcs.Transform(j); err != nil {
		t.Fatal(err)
	}
	ftok, err := dct.Parse(b64.Encode(j))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := chain.NewRoot(ftok, now)
	if err != nil {
		t.Fatal(err)
	}
	log, err := chain.OpenFile(filepath.Join(ws, wsDelegations))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if err := log.Insert(rec); err != nil {
		t.Fatal(err)
	}
	a, err := attest.Create(bob, attest.CreateParams{ContractID: "ct_b0b000000001", DelegationID: "del_f0f000000001", Success: true,
		Output: json.RawMessage(`{"summary":"done"}`), CostMicrocents: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	as, err := attest.OpenDir(filepath.Join(ws, wsAttestations))
	if err != nil {
		t.Fatal(err)
	}
	if err := as.Put(a); err != nil {
		t.Fatal(err)
	}
	if err := log.Complete("del_f0f000000001", a.ID, now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, dir, "credential", "issue", "--key", "alice.key", "--kind", "delegation",
		"--workspace", "ws", "--delegation", "del_f0f000000001")
	if code != 1 || !strings.Contains(stderr, "token") || strings.Contains(stdout, "del_f0f000000001") {
		t.Fatalf("issue for a delegation alice never signed: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestCredentialIssueRefusesCompletionTheAttestationDenies: the chain log's
// completion is not signed; a delegation logged completed whose delegatee
// attested failure gets no receipt saying completed.
func TestCredentialIssueRefusesCompletionTheAttestationDenies(t *testing.T) {
	dir := t.TempDir()
	receiptWorkspace(t, dir)
	ws := filepath.Join(dir, "ws")
	carol, err := identity.LoadKeyFile(filepath.Join(dir, "carol.key"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Add(-time.Minute)
	a, err := attest.Create(carol, attest.CreateParams{ContractID: "ct_b0b000000001", DelegationID: "del_ca201000000f", Success: false,
		Output: json.RawMessage(`{"error":"gave up"}`), CostMicrocents: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	as, err := attest.OpenDir(filepath.Join(ws, wsAttestations))
	if err != nil {
		t.Fatal(err)
	}
	if err := as.Put(a); err != nil {
		t.Fatal(err)
	}
	log, err := chain.OpenFile(filepath.Join(ws, wsDelegations))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if err := log.Complete("del_ca201000000f", a.ID, now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, dir, "credential", "issue", "--key", "alice.key", "--kind", "delegation",
		"--workspace", "ws", "--delegation", "del_ca201000000f")
	if code != 1 || !strings.Contains(stderr, "success") || strings.Contains(stdout, `"completed"`) {
		t.Fatalf("issue for a completion carol's attestation denies: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestCredentialIssueRefusesAttestationNotACompletion: only a completion
// attestation ends a delegation; one of another type named by the log's
// (unsigned) completion gets no receipt.
func TestCredentialIssueRefusesAttestationNotACompletion(t *testing.T) {
	dir := t.TempDir()
	receiptWorkspace(t, dir)
	ws := filepath.Join(dir, "ws")
	carol, err := identity.LoadKeyFile(filepath.Join(dir, "carol.key"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Add(-time.Minute)
	a, err := attest.Create(carol, attest.CreateParams{ContractID: "ct_b0b000000001", DelegationID: "del_ca201000000f", Success: true, Type: attest.DelegationVerification,
		Output: json.RawMessage(`{"checked":true}`), CostMicrocents: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	as, err := attest.OpenDir(filepath.Join(ws, wsAttestations))
	if err != nil {
		t.Fatal(err)
	}
	if err := as.Put(a); err != nil {
		t.Fatal(err)
	}
	log, err := chain.OpenFile(filepath.Join(ws, wsDelegations))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if err := log.Complete("del_ca201000000f", a.ID, now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, dir, "credential", "issue", "--key", "alice.key", "--kind", "delegation",
		"--workspace", "ws", "--delegation", "del_ca201000000f")
	if code != 1 || !strings.Contains(stderr, "completion") || strings.Contains(stdout, `"completed"`) {
		t.Fatalf("issue on a delegation_verification attestation: exit %d\n%s%s", code, stdout, stderr)
	}
}
