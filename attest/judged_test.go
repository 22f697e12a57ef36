package attest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/verify"
)

// A judge may score the same output differently on each run, so a claimed
// llm_judge outcome that differs from the recomputed one is not invalid:
// the recomputed judgement decides the verdict.
func TestJudgedOutcomeClaims(t *testing.T) {
	const judgedID = "ct_0000000000d1"
	c, err := contract.Create(rootKey, contract.CreateParams{
		ID: judgedID, Title: "Judged", OutputSchema: json.RawMessage(testSchema),
		Verification:        json.RawMessage(`{"method":"llm_judge","judgePrompt":"Is {output} a faithful answer to {contract}?","passThreshold":0.7,"evaluations":1}`),
		MaxBudgetMicrocents: 5000, Deadline: t0.Add(24 * time.Hour), MaxChainDepth: 1,
	}, t0)
	if err != nil {
		t.Fatal(err)
	}
	score := 0.8
	for _, tc := range []struct {
		name         string
		judge        float64
		claimPassed  bool
		claimScore   float64
		want         Verdict
		wantDetailed bool
	}{
		{"claim equals the judgement", 0.8, true, 0.8, Passed, false},
		{"claim scores differently, same verdict", 0.75, true, 0.9, Passed, true},
		{"claims a pass the judge does not give", 0.2, true, 0.9, Failed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			if err := w.contracts.Put(c); err != nil {
				t.Fatal(err)
			}
			score = tc.judge
			w.v.Output = &verify.Verifier{Judge: verify.JudgeFunc(func(context.Context, verify.JudgeRequest) (verify.JudgeResponse, error) {
				return verify.JudgeResponse{Score: score, Reasoning: "r"}, nil
			})}
			p := testParams()
			p.ContractID = judgedID
			s := tc.claimScore
			p.Outcome = &VerificationOutcome{Method: verify.MethodLLMJudge, Passed: tc.claimPassed, Score: &s}
			r, _ := w.v.Verify(context.Background(), create(t, aliceKey, p))
			if r == nil || r.Verdict != tc.want {
				t.Fatalf("verdict %+v, want %s", r, tc.want)
			}
			st, _ := r.Step(StepOutcome)
			if st.Status != StatusOK || (st.Detail != "") != tc.wantDetailed {
				t.Errorf("outcome step %+v", st)
			}
		})
	}
	// A deterministic spec is not judged: the same mismatch is invalid.
	w := newWorld(t)
	p := testParams()
	s := 0.5
	p.Outcome = &VerificationOutcome{Method: verify.MethodDeterministicCheck, Passed: true, Score: &s}
	if r, _ := w.v.Verify(context.Background(), create(t, aliceKey, p)); r == nil || r.Verdict != Invalid {
		t.Fatalf("deterministic mismatch: %+v", r)
	}
}
