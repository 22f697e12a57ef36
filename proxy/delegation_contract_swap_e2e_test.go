//go:build unix

package proxy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// The contract swap of TestDelegationContractSwapCannotSelfComplete, through the
// real binary: the agent A holds the root's token for delegation delA
// under contract ct_aaaaaaaaaaaa. It never presents the root's contract.
// Instead it attenuates its own token to a sybil key (dct's default keeps
// the parent's contract ID), signs a trivial contract of its own under
// ct_aaaaaaaaaaaa and delegates that. The proxy records delA as an
// ancestor and stores A's contract under the root's contract ID; A then
// completes delA with output that no real contract would accept and gets
// it recorded completed, with a reliability signal.
// Found by a review (was TestReviewContractSwapThroughProxy).
func TestE2EDelegationContractSwapCannotSelfComplete(t *testing.T) {
	r := newDelegationRun(t)
	delA := r.aTok.Unverified().Authority.DelegationID
	sybil := mcptest.NewKey(t, "sybil")
	tok, err := dct.Attenuate(r.aTok, dct.AttenuateParams{Attenuator: r.e.Agent, Delegatee: sybil.ID(), DelegationID: mcptest.NewDelegationID()})
	if err != nil {
		t.Fatal(err)
	}
	fake, err := contract.Create(r.e.Agent, contract.CreateParams{ID: "ct_aaaaaaaaaaaa", Title: "anything",
		OutputSchema:        json.RawMessage(`{}`),
		Verification:        json.RawMessage(`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":0}}`),
		MaxBudgetMicrocents: 1, Deadline: time.Now().Add(time.Hour), RequiredCapabilities: []string{"docs:read"},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if res := r.delegate(fake, tok, delA); res.Accepted || res.Reason != gate.RejectContractMismatch {
		t.Fatalf("a delegation reusing its parent's contract ID was not refused: %+v", res)
	}
	// Record delA as an ancestor the honest way, then try to complete it
	// without the root's contract: refused, and delA stays active.
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate B: %+v", res)
	}
	a, err := attest.Create(r.e.Agent, attest.CreateParams{ContractID: "ct_aaaaaaaaaaaa", DelegationID: delA, Success: true,
		Output: json.RawMessage(`{"summary":""}`), CostMicrocents: 0, DurationMs: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := json.Marshal(a)
	resp := r.request(gate.MethodComplete, gate.CompleteParams{DelegationID: delA, Attestation: ab})
	if resp.Error == nil || !strings.Contains(resp.Error.Message, "no contract was delegated") {
		t.Errorf("completing delA without its contract: %+v", resp)
	}
	if st := r.chainStatus(delA); st != "active" {
		t.Errorf("delA is %q", st)
	}
	// After B completes, B's token no longer authorizes calls, even when a
	// call presents it itself.
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 0); done.Status != "completed" {
		t.Fatalf("complete B: %+v", done)
	}
	got := r.s.CallAs(t, r.bTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
	if got.RPC == nil || got.RPC.Code != gate.DenialCode || !strings.Contains(mcptest.MustJSON(got.RPC.Data), "has ended (completed)") {
		t.Errorf("a call under the completed delegation: %+v", got)
	}
	if resp.Error == nil {
		var done gate.CompleteResult
		_ = json.Unmarshal(resp.Result, &done)
		rep := r.cli("reputation", "show", "--workspace", r.ws, "--", r.e.Agent.ID())
		if done.Status == "completed" {
			t.Errorf("HOLE: the root's delegation %s was recorded %s against a contract the agent signed itself; agent's reputation:\n%s",
				delA, r.chainStatus(delA), strings.TrimSpace(rep))
		}
	}
}
