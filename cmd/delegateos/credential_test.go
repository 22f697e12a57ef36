package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

// receiptWorkspace writes a workspace in which alice delegated a task to
// bob under a contract and bob completed it with an attestation, as the
// proxy records them; and an active delegation to carol.
func receiptWorkspace(t *testing.T, dir string) (alice, bob *identity.Keypair) {
	t.Helper()
	key := func(b byte, name string) *identity.Keypair {
		k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := identity.SaveKeyFile(filepath.Join(dir, name+".key"), k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	alice, bob, carol := key(1, "alice"), key(2, "bob"), key(3, "carol")
	ws := filepath.Join(dir, "ws")
	now := time.Now().UTC().Add(-time.Minute)
	c, err := contract.Create(alice, contract.CreateParams{
		ID: "ct_b0b000000001", Title: "Summarize the notes",
		OutputSchema: json.RawMessage(`{"type":"object"}`), Verification: json.RawMessage(`{"method":"schema_match","schema":{"type":"object"}}`),
		MaxBudgetMicrocents: 50000, Deadline: now.Add(time.Hour), MaxChainDepth: 1, RequiredCapabilities: []string{"docs:read"},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := contract.OpenDir(filepath.Join(ws, wsTaskContracts))
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Put(c); err != nil {
		t.Fatal(err)
	}
	log, err := chain.OpenFile(filepath.Join(ws, wsDelegations))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cap, err := dct.ParseCapability("docs:read:/project/**")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		id string
		to *identity.Keypair
	}{{"del_b0b000000001", bob}, {"del_ca201000000f", carol}} {
		tok, err := dct.Create(dct.CreateParams{Issuer: alice, Delegatee: d.to.ID(), Capabilities: []dct.Capability{cap},
			ContractID: c.ID, DelegationID: d.id, MaxChainDepth: 1, MaxBudgetMicrocents: 50000, ExpiresAt: now.Add(time.Hour), IssuedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := chain.NewRoot(tok, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := log.Insert(rec); err != nil {
			t.Fatal(err)
		}
	}
	score := 1.0
	a, err := attest.Create(bob, attest.CreateParams{ContractID: c.ID, DelegationID: "del_b0b000000001", Success: true,
		Output: json.RawMessage(`{"summary":"nothing new"}`), CostMicrocents: 1000,
		Outcome: &attest.VerificationOutcome{Method: "schema_match", Passed: true, Score: &score}}, now)
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
	if err := log.Complete("del_b0b000000001", a.ID, now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	return alice, bob
}

// cli runs the delegateos binary in dir.
func cli(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin, err := exec.LookPath("delegateos")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// TestCredentialDelegationReceipt issues a DelegationReceipt for a
// completed delegation from the workspace's stores, verifies it, and
// rejects it after a change to any field that carries the delegation's
// facts or the proof.
func TestCredentialDelegationReceipt(t *testing.T) {
	dir := t.TempDir()
	alice, bob := receiptWorkspace(t, dir)
	_, stderr, code := cli(t, dir, "credential", "issue", "--key", "alice.key", "--kind", "delegation",
		"--workspace", "ws", "--delegation", "del_b0b000000001", "--out", "receipt.json")
	if code != 0 {
		t.Fatalf("issue: exit %d: %s", code, stderr)
	}
	stdout, stderr, code := cli(t, dir, "credential", "verify", "receipt.json", "--signer", alice.DID())
	if code != 0 || !strings.Contains(stdout, "ok      delegation receipt") || !strings.HasSuffix(stdout, "VERIFIED\n") {
		t.Fatalf("verify: exit %d\n%s%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "receipt.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	subj := doc["credentialSubject"].(map[string]any)
	want := map[string]any{
		"id": bob.DID(), "delegator": alice.DID(), "delegationId": "del_b0b000000001", "contractId": "ct_b0b000000001",
		"purpose": "Summarize the notes", "costMicrocents": 1000.0, "budgetMicrocents": 50000.0, "outcome": "completed",
		"verificationPassed": true, "verificationScore": 1.0,
	}
	for k, v := range want {
		if subj[k] != v {
			t.Errorf("credentialSubject.%s = %v, want %v", k, subj[k], v)
		}
	}
	if !strings.HasPrefix(subj["attestationId"].(string), "att_") || doc["issuer"] != alice.DID() {
		t.Errorf("receipt %s", b)
	}

	// Each tamper is refused, naming the check that failed.
	tampers := map[string]func(d map[string]any){
		"cost":        func(d map[string]any) { d["credentialSubject"].(map[string]any)["costMicrocents"] = 1 },
		"outcome":     func(d map[string]any) { d["credentialSubject"].(map[string]any)["outcome"] = "failed" },
		"delegatee":   func(d map[string]any) { d["credentialSubject"].(map[string]any)["id"] = alice.DID() },
		"attestation": func(d map[string]any) { d["credentialSubject"].(map[string]any)["attestationId"] = "att_000000000000" },
		"scope":       func(d map[string]any) { d["credentialSubject"].(map[string]any)["scope"] = []any{} },
		"validUntil":  func(d map[string]any) { d["validUntil"] = "2099-01-01T00:00:00Z" },
		"created":     func(d map[string]any) { d["proof"].(map[string]any)["created"] = "2020-01-01T00:00:00Z" },
	}
	for name, f := range tampers {
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		f(d)
		tb, _ := json.Marshal(d)
		if err := os.WriteFile(filepath.Join(dir, "t.json"), tb, 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := cli(t, dir, "credential", "verify", "t.json")
		if code != 1 || !strings.Contains(stderr, "not verified: signature: invalid signature") || !strings.Contains(stdout, "NOT VERIFIED") {
			t.Errorf("%s: exit %d\n%s%s", name, code, stdout, stderr)
		}
	}
	// Signed by another key than the one pinned.
	if _, stderr, code := cli(t, dir, "credential", "verify", "receipt.json", "--signer", bob.DID()); code != 1 || !strings.Contains(stderr, "untrusted signer") {
		t.Errorf("--signer bob: exit %d: %s", code, stderr)
	}
	// The same delegation named by its attestation.
	if _, stderr, code := cli(t, dir, "credential", "issue", "--key", "alice.key", "--kind", "delegation", "--workspace", "ws",
		"--attestation", subj["attestationId"].(string), "--out", "by-att.json"); code != 0 {
		t.Errorf("--attestation: exit %d: %s", code, stderr)
	} else if stdout, stderr, code := cli(t, dir, "credential", "verify", "by-att.json", "--json"); code != 0 || !strings.Contains(stdout, `"verified": true`) {
		t.Errorf("verify by-att.json: exit %d\n%s%s", code, stdout, stderr)
	} else if b2, _ := os.ReadFile(filepath.Join(dir, "by-att.json")); !strings.Contains(string(b2), `"delegationId": "del_b0b000000001"`) {
		t.Errorf("by-att.json: %s", b2)
	}
	// An attestation that ended no recorded delegation.
	if _, stderr, code := cli(t, dir, "credential", "issue", "--key", "alice.key", "--kind", "delegation", "--workspace", "ws", "--attestation", "att_000000000000"); code != 1 || !strings.Contains(stderr, "attestation att_000000000000") {
		t.Errorf("unknown attestation: exit %d: %s", code, stderr)
	}
	// Only the delegator issues the receipt: not the delegatee.
	if _, stderr, code := cli(t, dir, "credential", "issue", "--key", "bob.key", "--kind", "delegation", "--workspace", "ws", "--delegation", "del_b0b000000001"); code != 1 || !strings.Contains(stderr, "--key is not the delegator of del_b0b000000001") {
		t.Errorf("bob issuing: exit %d: %s", code, stderr)
	}
	// An active delegation has no receipt; an unknown one neither.
	for del, msg := range map[string]string{
		"del_ca201000000f": "delegation del_ca201000000f is active: a receipt is issued for a completed or failed delegation",
		"del_00000000000a": "delegation del_00000000000a is not recorded",
	} {
		_, stderr, code := cli(t, dir, "credential", "issue", "--key", "alice.key", "--kind", "delegation", "--workspace", "ws", "--delegation", del)
		if code != 1 || !strings.Contains(stderr, msg) {
			t.Errorf("%s: exit %d: %s", del, code, stderr)
		}
	}
}
