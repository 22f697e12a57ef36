package attest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/verify"
)

// statuses renders a report's steps as "name:status ...".
func statuses(r *Report) string {
	var b []string
	for _, s := range r.Steps {
		b = append(b, string(s.Name)+":"+string(s.Status))
	}
	return strings.Join(b, " ")
}

func wantStep(t *testing.T, r *Report, name StepName, want Status) {
	t.Helper()
	s, ok := r.Step(name)
	if !ok {
		t.Fatalf("no %s step in %s", name, statuses(r))
	}
	if s.Status != want {
		t.Errorf("%s is %s (%s), want %s; all: %s", name, s.Status, s.Detail, want, statuses(r))
	}
}

func wantVerdict(t *testing.T, r *Report, err error, want Verdict) {
	t.Helper()
	if r == nil {
		t.Fatalf("no report (%v)", err)
	}
	if r.Verdict != want {
		t.Errorf("verdict %s, want %s (%v); steps: %s", r.Verdict, want, err, statuses(r))
	}
	if want == Passed {
		if err != nil {
			t.Errorf("passed with error %v", err)
		}
		return
	}
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Verdict != want || !errors.Is(err, verdictErrors[want]) {
		t.Errorf("error %v, want a *VerifyError matching %v", err, verdictErrors[want])
	}
	if len(r.Steps) != len(stepOrder) {
		t.Errorf("%d steps, want %d", len(r.Steps), len(stepOrder))
	}
}

func TestVerifyPasses(t *testing.T) {
	w := newWorld(t)
	r, err := w.v.Verify(context.Background(), testAttestation(t))
	wantVerdict(t, r, err, Passed)
	want := "signature:ok contract:ok output_schema:ok verification:ok budget:ok outcome:skipped timing:ok deadline:ok children:skipped"
	if got := statuses(r); got != want {
		t.Errorf("steps\n got %s\nwant %s", got, want)
	}
	if r.ContractIssuer != rootKey.ID() || r.Principal != aliceKey.ID() || r.ContractID != rootContractID {
		t.Errorf("report %+v", r)
	}
	if s, _ := r.Step(StepVerification); s.Check == nil || !s.Check.Passed {
		t.Errorf("verification step without its check result: %+v", s)
	}
}

func TestVerifySignature(t *testing.T) {
	w := newWorld(t)
	a := testAttestation(t)
	a.Result.CostMicrocents = 1
	r, err := w.v.Verify(context.Background(), a)
	wantVerdict(t, r, err, Invalid)
	wantStep(t, r, StepSignature, StatusInvalid)
	for _, name := range stepOrder[1:] {
		wantStep(t, r, name, StatusSkipped)
	}
	if !strings.Contains(err.Error(), "signature invalid") {
		t.Errorf("error %q does not name the step", err)
	}
}

func TestVerifyContract(t *testing.T) {
	ctx := context.Background()
	t.Run("missing", func(t *testing.T) {
		w := newWorld(t)
		p := testParams()
		p.ContractID = "ct_00000000dead"
		r, err := w.v.Verify(ctx, create(t, aliceKey, p))
		wantVerdict(t, r, err, Invalid)
		wantStep(t, r, StepContract, StatusInvalid)
	})
	t.Run("tampered contract", func(t *testing.T) {
		c := makeContract(t, rootKey, rootContractID, 5000)
		c.Constraints.MaxBudgetMicrocents = 1 << 40
		w := newWorld(t)
		w.v.Contracts = &rawStore[*contract.TaskContract]{m: map[string]*contract.TaskContract{rootContractID: c}}
		r, err := w.v.Verify(ctx, testAttestation(t))
		wantVerdict(t, r, err, Invalid)
		wantStep(t, r, StepContract, StatusInvalid)
	})
	t.Run("another contract for the ID", func(t *testing.T) {
		w := newWorld(t)
		other := makeContract(t, rootKey, "ct_000000000002", 5000)
		w.v.Contracts = &rawStore[*contract.TaskContract]{m: map[string]*contract.TaskContract{rootContractID: other}}
		r, err := w.v.Verify(ctx, testAttestation(t))
		wantVerdict(t, r, err, Invalid)
		wantStep(t, r, StepContract, StatusInvalid)
	})
	t.Run("store error", func(t *testing.T) {
		w := newWorld(t)
		boom := errors.New("disk on fire")
		w.v.Contracts = &rawStore[*contract.TaskContract]{err: boom}
		r, err := w.v.Verify(ctx, testAttestation(t))
		wantVerdict(t, r, err, Unverified)
		wantStep(t, r, StepContract, StatusError)
		if !errors.Is(err, boom) {
			t.Errorf("error %v does not wrap the store's", err)
		}
	})
}

func TestVerifyOutput(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name         string
		change       func(p *CreateParams)
		schema, spec Status
		verdict      Verdict
	}{
		{"schema mismatch", func(p *CreateParams) {
			p.Output = json.RawMessage(`{"summary":"Quantum computers factor integers.","pages":"three"}`)
		}, StatusFailed, StatusOK, Failed},
		{"spec fails", func(p *CreateParams) { p.Output = json.RawMessage(`{"summary":"short"}`) }, StatusOK, StatusFailed, Failed},
		{"both fail", func(p *CreateParams) { p.Output = json.RawMessage(`[1,2]`) }, StatusFailed, StatusFailed, Failed},
		{"no output", func(p *CreateParams) { p.Output = nil }, StatusFailed, StatusFailed, Failed},
		{"null output", func(p *CreateParams) { p.Output = json.RawMessage(`null`) }, StatusFailed, StatusFailed, Failed},
		{"hash only", func(p *CreateParams) { p.HashOnly = true }, StatusFailed, StatusFailed, Failed},
		{"success false", func(p *CreateParams) { p.Success = false }, StatusSkipped, StatusFailed, Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			p := testParams()
			tt.change(&p)
			r, err := w.v.Verify(ctx, create(t, aliceKey, p))
			wantVerdict(t, r, err, tt.verdict)
			wantStep(t, r, StepOutputSchema, tt.schema)
			wantStep(t, r, StepVerification, tt.spec)
			wantStep(t, r, StepSignature, StatusOK)
		})
	}
}

// A check that cannot run leaves the attestation unverified, never passed.
func TestVerifyCheckCannotRun(t *testing.T) {
	w := newWorld(t)
	c, err := contract.Create(rootKey, contract.CreateParams{
		ID:                  "ct_00000000000d",
		Title:               "Judge it",
		OutputSchema:        json.RawMessage(`{"type":"object"}`),
		Verification:        json.RawMessage(`{"method":"llm_judge","judgePrompt":"Does {output} do what {contract} asks?","passThreshold":0.5}`),
		Deadline:            t0.Add(time.Hour * 24),
		MaxBudgetMicrocents: 5000,
	}, t0)
	if err != nil {
		t.Fatal(err)
	}
	w.contracts.Put(c)
	p := testParams()
	p.ContractID = c.ID
	r, err := w.v.Verify(context.Background(), create(t, aliceKey, p))
	wantVerdict(t, r, err, Unverified)
	wantStep(t, r, StepVerification, StatusError)
	wantStep(t, r, StepOutputSchema, StatusOK)
	if !errors.Is(err, verify.ErrNoJudge) {
		t.Errorf("error %v does not wrap verify.ErrNoJudge", err)
	}

	// With a judge, the same attestation is decided.
	w.v.Output = &verify.Verifier{Judge: verify.JudgeFunc(func(context.Context, verify.JudgeRequest) (verify.JudgeResponse, error) {
		return verify.JudgeResponse{Score: 0.9, Reasoning: "fine"}, nil
	})}
	r, err = w.v.Verify(context.Background(), create(t, aliceKey, p))
	wantVerdict(t, r, err, Passed)
}

func TestVerifyBudget(t *testing.T) {
	for _, tt := range []struct {
		cost    int64
		status  Status
		verdict Verdict
	}{{5000, StatusOK, Passed}, {5001, StatusInvalid, Invalid}, {0, StatusOK, Passed}} {
		t.Run(fmt.Sprint(tt.cost), func(t *testing.T) {
			w := newWorld(t)
			p := testParams()
			p.CostMicrocents = tt.cost
			r, err := w.v.Verify(context.Background(), create(t, aliceKey, p))
			wantVerdict(t, r, err, tt.verdict)
			wantStep(t, r, StepBudget, tt.status)
		})
	}
}

func TestVerifyOutcome(t *testing.T) {
	score := func(f float64) *float64 { return &f }
	const method = "deterministic_check"
	tests := []struct {
		name    string
		success bool
		output  string
		claim   *VerificationOutcome
		status  Status
		verdict Verdict
	}{
		{"agrees", true, testOutput, &VerificationOutcome{Method: method, Passed: true}, StatusOK, Passed},
		{"agrees with score", true, testOutput, &VerificationOutcome{Method: method, Passed: true, Score: score(1)}, StatusOK, Passed},
		{"agrees within tolerance", true, testOutput, &VerificationOutcome{Method: method, Passed: true, Score: score(1 - ScoreTolerance/2)}, StatusOK, Passed},
		{"claims passed, recomputed failed", true, `{"summary":"short"}`, &VerificationOutcome{Method: method, Passed: true}, StatusInvalid, Invalid},
		{"claims failed, recomputed passed", true, testOutput, &VerificationOutcome{Method: method, Passed: false}, StatusInvalid, Invalid},
		{"agrees on failure", true, `{"summary":"short"}`, &VerificationOutcome{Method: method, Passed: false, Score: score(0)}, StatusOK, Failed},
		{"score off", true, testOutput, &VerificationOutcome{Method: method, Passed: true, Score: score(0.9)}, StatusInvalid, Invalid},
		{"other method", true, testOutput, &VerificationOutcome{Method: "schema_match", Passed: true}, StatusInvalid, Invalid},
		{"passed with success=false", false, testOutput, &VerificationOutcome{Method: method, Passed: true}, StatusInvalid, Invalid},
		{"failed with success=false", false, testOutput, &VerificationOutcome{Method: method, Passed: false}, StatusOK, Failed},
		{"other method with success=false", false, testOutput, &VerificationOutcome{Method: "composite", Passed: false}, StatusInvalid, Invalid},
		{"claim without output", true, "", &VerificationOutcome{Method: method, Passed: true}, StatusSkipped, Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			p := testParams()
			p.Success, p.Outcome = tt.success, tt.claim
			p.Output = nil
			if tt.output != "" {
				p.Output = json.RawMessage(tt.output)
			}
			r, err := w.v.Verify(context.Background(), create(t, aliceKey, p))
			wantVerdict(t, r, err, tt.verdict)
			wantStep(t, r, StepOutcome, tt.status)
		})
	}
}

func TestVerifyTime(t *testing.T) {
	tests := []struct {
		name             string
		made             time.Time
		timing, deadline Status
		verdict          Verdict
	}{
		{"with the contract", t0, StatusOK, StatusOK, Passed},
		{"clock skew before the contract", t0.Add(-DefaultClockSkew), StatusOK, StatusOK, Passed},
		{"before the contract", t0.Add(-DefaultClockSkew - time.Millisecond), StatusInvalid, StatusOK, Invalid},
		{"at the deadline", t0.Add(24 * time.Hour), StatusOK, StatusOK, Passed},
		{"after the deadline", t0.Add(24*time.Hour + time.Millisecond), StatusOK, StatusFailed, Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.v.Now = func() time.Time { return t0.Add(48 * time.Hour) }
			a, err := Create(aliceKey, testParams(), tt.made)
			if err != nil {
				t.Fatal(err)
			}
			r, err := w.v.Verify(context.Background(), a)
			wantVerdict(t, r, err, tt.verdict)
			wantStep(t, r, StepTiming, tt.timing)
			wantStep(t, r, StepDeadline, tt.deadline)
		})
	}
	// Made in the future of the verifier's clock.
	w := newWorld(t)
	w.v.Now = func() time.Time { return t1 }
	w.v.ClockSkew = time.Minute
	for made, want := range map[time.Time]Status{t1.Add(time.Minute): StatusOK, t1.Add(time.Minute + time.Millisecond): StatusInvalid} {
		a, _ := Create(aliceKey, testParams(), made)
		r, _ := w.v.Verify(context.Background(), a)
		wantStep(t, r, StepTiming, want)
	}
}

func TestVerifyContextCancelled(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := w.v.Verify(ctx, testAttestation(t))
	wantVerdict(t, r, err, Unverified)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not wrap context.Canceled", err)
	}
}

func TestVerifyCallErrors(t *testing.T) {
	w := newWorld(t)
	if r, err := w.v.Verify(context.Background(), nil); err == nil || r != nil {
		t.Error("nil attestation: want an error and no report")
	}
	v := &Verifier{}
	if r, err := v.Verify(context.Background(), testAttestation(t)); err == nil || r != nil {
		t.Error("no contract store: want an error and no report")
	}
}

func TestVerifyErrorMessage(t *testing.T) {
	w := newWorld(t)
	p := testParams()
	p.CostMicrocents = 9999
	p.Output = json.RawMessage(`{"summary":"short"}`)
	_, err := w.v.Verify(context.Background(), create(t, aliceKey, p))
	want := "attestation att_a1b2c3d4e5f6: invalid: verification failed"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "budget invalid (cost 9999 microcents is over the contract's budget of 5000)") {
		t.Errorf("error %q", err)
	}
	var ve *VerifyError
	if !errors.As(err, &ve) || len(ve.Steps) != 2 {
		t.Errorf("want the two steps that did not pass, got %+v", ve)
	}
}
