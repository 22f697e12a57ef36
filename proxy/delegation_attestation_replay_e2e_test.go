//go:build unix

package proxy_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team (issue 26.1, reputation), fixed: an attestation named its
// delegation and contract by ID only; it now also names (signed) the
// delegation key, and a proxy completes only the delegation with that key. A sybil with a root token of her own
// records, at a proxy with another workspace, a delegation TO the victim
// (B) under B's delegation ID and contract ID, with a contract of hers
// that B's work cannot pass, then replays B's real attestation there:
// the proxy judges B's output against the sybil's contract, ends the
// sybil's delegation failed, and records a failure signal about B.
func TestE2EAttestationReplayRefused(t *testing.T) {
	r := newDelegationRun(t)
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	aID := r.aTok.Unverified().Authority.DelegationID
	if res := r.delegate(r.bContract, r.bTok, aID); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	keys := r.bTok.DelegationKeys()
	att := attestForKey(t, r.b, r.bContract.ID, delB, keys[len(keys)-1])
	if done := decodeResult[gate.CompleteResult](t, r.request(gate.MethodComplete, gate.CompleteParams{DelegationID: delB, Attestation: att})); done.Status != "completed" {
		t.Fatalf("B's complete: %+v", done)
	}

	// The sybil: her own root, attenuated to B under B's IDs.
	sy := newSybil(t, r, delB)
	tok, err := dct.Attenuate(sy.root, dct.AttenuateParams{Attenuator: sy.key, Delegatee: r.b.ID(), DelegationID: delB, ContractID: r.bContract.ID})
	if err != nil {
		t.Fatal(err)
	}
	c, err := contract.Create(sy.key, contract.CreateParams{ID: r.bContract.ID, Title: "Impossible",
		Inputs:              json.RawMessage(`{}`),
		OutputSchema:        json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`),
		Verification:        json.RawMessage(`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":5000}}`),
		MaxBudgetMicrocents: 5000, Deadline: time.Now().Add(time.Hour), MaxChainDepth: 0, RequiredCapabilities: []string{"docs:read"},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ws2 := filepath.Join(r.e.Dir, "ws2")
	pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
	pol.Rules = pol.Rules[1:]
	pol.RevocationList = r.revs
	pol.Extra = "workspace: " + strconv.Quote(ws2) + "\n"
	send := sender(t, r.e.StartProxy(mcptest.ProxyOptions{Policy: pol}).Connect(mcptest.SessionOptions{}))
	cb, _ := json.Marshal(c)
	if res := decodeResult[gate.DelegateResult](t, send(gate.MethodDelegate, gate.DelegateParams{
		Contract: cb, DCT: tok.String(), DCTFormat: dct.Format, DelegationID: delB, ParentDelegationID: sy.root.Unverified().Authority.DelegationID})); !res.Accepted {
		t.Fatalf("the sybil's delegate to B: %+v", res)
	}
	resp := send(gate.MethodComplete, gate.CompleteParams{DelegationID: delB, Attestation: att})
	if resp.Error == nil || !strings.Contains(resp.Error.Message, "not recorded here") {
		done := decodeResult[gate.CompleteResult](t, resp)
		t.Errorf("B's attestation, replayed by the sybil against her own contract, was taken: %+v", done)
	}
	out := r.cli("reputation", "show", "--workspace", ws2, "--", r.b.DID())
	if !strings.Contains(out, "is unknown: this workspace has no signals about it") {
		t.Errorf("the sybil's replay gave B signals:\n%s", out)
	}
}

// attestForKey is attestFor naming the delegation key too.
func attestForKey(t *testing.T, k *identity.Keypair, contractID, del, key string) json.RawMessage {
	t.Helper()
	a, err := attest.Create(k, attest.CreateParams{ContractID: contractID, DelegationID: del, DelegationKey: key, Success: true,
		Output: json.RawMessage(`{"summary":"a summary of more than twenty characters"}`), CostMicrocents: 0, DurationMs: 10}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
