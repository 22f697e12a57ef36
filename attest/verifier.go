package attest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"time"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/verify"
)

// Verifier verifies attestations against their contracts (§7.3) and,
// recursively, their child attestations.
type Verifier struct {
	// Contracts finds the contract of each attestation by its contractId.
	// Required.
	Contracts contract.Store
	// Attestations finds child attestations by ID. Nil means none can be
	// found: an attestation with children is unverified.
	Attestations Store
	// Output runs verification specs on outputs. Nil means a zero
	// verify.Verifier.
	Output *verify.Verifier
	// Now is the verifier's clock. Nil means time.Now.
	Now func() time.Time
	// ClockSkew is how far apart clocks may be; zero means
	// DefaultClockSkew.
	ClockSkew time.Duration
}

// walk is the state of one Verify call across the tree.
type walk struct {
	seen      map[string]bool
	count     int
	causes    []error
	contracts map[string]*contract.TaskContract // verified, by ID
}

// Verify verifies a (see the package documentation) and returns the
// report. The error is nil exactly when the verdict is Passed; otherwise
// it is a *VerifyError. An error with a nil report means the call itself
// was wrong (no attestation, no contract store).
func (v *Verifier) Verify(ctx context.Context, a *Attestation) (*Report, error) {
	if a == nil {
		return nil, errors.New("attest: no attestation to verify")
	}
	if v.Contracts == nil {
		return nil, errors.New("attest: the verifier has no contract store")
	}
	w := &walk{seen: map[string]bool{a.ID: true}, count: 1, contracts: map[string]*contract.TaskContract{}}
	r := v.verify(ctx, a, 0, w)
	if r.Verdict == Passed {
		return r, nil
	}
	e := &VerifyError{AttestationID: a.ID, Verdict: r.Verdict, causes: w.causes}
	for _, s := range r.Steps {
		if s.Status != StatusOK && s.Status != StatusSkipped {
			e.Steps = append(e.Steps, s)
		}
	}
	return r, e
}

// stepOrder is the order steps are reported in.
var stepOrder = []StepName{
	StepSignature, StepContract, StepOutputSchema, StepVerification,
	StepBudget, StepOutcome, StepTiming, StepDeadline, StepChildren,
}

func (v *Verifier) verify(ctx context.Context, a *Attestation, depth int, w *walk) *Report {
	r := &Report{AttestationID: a.ID, ContractID: a.ContractID, Principal: a.Principal, Verdict: Passed}
	if err := a.Verify(); err != nil {
		r.add(Step{Name: StepSignature, Status: StatusInvalid, Detail: err.Error()})
		r.skipRest("the attestation is not authentic")
		return r
	}
	r.add(Step{Name: StepSignature, Status: StatusOK})
	c, st := v.contract(a, w)
	r.add(st)
	if c == nil {
		r.skipRest("no verified contract")
		return r
	}
	r.ContractIssuer = c.Issuer
	schema, check, recomputed := v.checkOutput(ctx, a, c, w)
	r.add(schema)
	r.add(check)
	r.add(checkBudget(a, c))
	r.add(checkOutcome(a, c, recomputed))
	timing, deadline := v.checkTime(a, c)
	r.add(timing)
	r.add(deadline)
	r.add(v.checkChildren(ctx, a, c, depth, w, r))
	return r
}

// skipRest reports every step not yet reported as skipped.
func (r *Report) skipRest(why string) {
	for _, name := range stepOrder[len(r.Steps):] {
		r.add(Step{Name: name, Status: StatusSkipped, Detail: "not checked: " + why})
	}
}

// cause records an error that kept a check from running and returns its step.
func (w *walk) cause(name StepName, err error) Step {
	w.causes = append(w.causes, err)
	return Step{Name: name, Status: StatusError, Detail: err.Error()}
}

func (v *Verifier) contract(a *Attestation, w *walk) (*contract.TaskContract, Step) {
	if c := w.contracts[a.ContractID]; c != nil {
		return c, Step{Name: StepContract, Status: StatusOK}
	}
	c, err := v.Contracts.Get(a.ContractID)
	if err == nil && c.ID != a.ContractID {
		err = fmt.Errorf("%w: the store returned contract %s for %s", contract.ErrMalformed, c.ID, a.ContractID)
	}
	if err == nil {
		err = c.Verify() // a Store need not verify what it returns
	}
	switch {
	case err == nil:
		w.contracts[c.ID] = c
		return c, Step{Name: StepContract, Status: StatusOK}
	case errors.Is(err, fs.ErrNotExist):
		return nil, Step{Name: StepContract, Status: StatusInvalid, Detail: fmt.Sprintf("contract %s not found", a.ContractID)}
	case errors.Is(err, contract.ErrMalformed), errors.Is(err, contract.ErrInvalidSignature):
		return nil, Step{Name: StepContract, Status: StatusInvalid, Detail: err.Error()}
	}
	return nil, w.cause(StepContract, fmt.Errorf("contract %s: %w", a.ContractID, err))
}

// checkOutput is §7.3 steps 2 and 3. It returns the recomputed result of
// the contract's verification spec, when it could run.
func (v *Verifier) checkOutput(ctx context.Context, a *Attestation, c *contract.TaskContract, w *walk) (schema, check Step, recomputed *verify.CheckResult) {
	schema, check = Step{Name: StepOutputSchema}, Step{Name: StepVerification}
	if !a.Result.Success {
		// A record of failure is valid, and its outcome is failed.
		schema.Status, schema.Detail = StatusSkipped, "result.success is false"
		check.Status, check.Detail = StatusFailed, "the attester reports result.success=false"
		return schema, check, nil
	}
	if a.Result.Output == nil {
		why := "no output to check"
		if a.Result.OutputHash != nil {
			why = "only the output's hash was attested; the output cannot be checked"
		}
		schema.Status, schema.Detail = StatusFailed, why
		check.Status, check.Detail = StatusFailed, why
		return schema, check, nil
	}
	out := v.Output
	if out == nil {
		out = &verify.Verifier{}
	}
	task := c.VerifyTask()
	run := func(step Step, spec *verify.Spec, err error) (Step, *verify.CheckResult) {
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return w.cause(step.Name, err), nil
		}
		res, err := out.Verify(ctx, spec, task, a.Result.Output)
		if err != nil {
			return w.cause(step.Name, err), nil
		}
		step.Check = &res
		step.Status = StatusOK
		if !res.Passed {
			step.Status, step.Detail = StatusFailed, res.Details
		}
		return step, &res
	}
	schemaSpec, err := contract.SchemaSpec(c.Task.OutputSchema)
	schema, _ = run(schema, schemaSpec, err)
	spec, err := c.Spec()
	check, recomputed = run(check, spec, err)
	return schema, check, recomputed
}

func checkBudget(a *Attestation, c *contract.TaskContract) Step {
	s := Step{Name: StepBudget, Status: StatusOK}
	if a.Result.CostMicrocents > c.Constraints.MaxBudgetMicrocents {
		s.Status = StatusInvalid
		s.Detail = fmt.Sprintf("cost %d microcents is over the contract's budget of %d", a.Result.CostMicrocents, c.Constraints.MaxBudgetMicrocents)
	}
	return s
}

// checkOutcome holds a claimed verification outcome to what was recomputed.
// A claim that cannot be compared (the output could not be checked) is
// skipped: the verdict is then not passed anyway.
func checkOutcome(a *Attestation, c *contract.TaskContract, recomputed *verify.CheckResult) Step {
	s := Step{Name: StepOutcome, Status: StatusOK}
	o := a.Result.VerificationOutcome
	if o == nil {
		s.Status, s.Detail = StatusSkipped, "no outcome claimed"
		return s
	}
	invalid := func(format string, args ...any) Step {
		s.Status, s.Detail = StatusInvalid, fmt.Sprintf(format, args...)
		return s
	}
	if m := specMethod(c); o.Method != m {
		return invalid("claims method %q, the contract's is %q", clip(o.Method), m)
	}
	if !a.Result.Success {
		if o.Passed {
			return invalid("claims the output passed verification but reports success=false")
		}
		return s
	}
	if recomputed == nil {
		s.Status, s.Detail = StatusSkipped, "the output could not be checked, so the claim cannot be compared"
		return s
	}
	if spec, err := c.Spec(); err == nil && judged(spec) {
		// A judge (a model or a person) may score the same output
		// differently each time: the recomputed judgement decides the
		// verdict, and a claim that differs from it is not a forgery.
		if o.Passed != recomputed.Passed || (o.Score != nil && math.Abs(*o.Score-scoreOf(*recomputed)) > ScoreTolerance) {
			s.Detail = "the claimed outcome differs from the recomputed judgement, which decides"
		}
		return s
	}
	if o.Passed != recomputed.Passed {
		return invalid("claims passed=%t, recomputed passed=%t", o.Passed, recomputed.Passed)
	}
	if o.Score != nil {
		if got := scoreOf(*recomputed); math.Abs(*o.Score-got) > ScoreTolerance {
			return invalid("claims score %v, recomputed %v", *o.Score, got)
		}
	}
	return s
}

// scoreOf is a result's score, or 1 or 0 for a result without one (§6.4).
func scoreOf(r verify.CheckResult) float64 {
	switch {
	case r.Score != nil:
		return *r.Score
	case r.Passed:
		return 1
	}
	return 0
}

// specMethod is the method of a verified contract's verification spec.
func specMethod(c *contract.TaskContract) string {
	var m struct {
		Method string `json:"method"`
	}
	json.Unmarshal(c.Verification, &m) // the contract verified, so its spec parsed
	return m.Method
}

func (v *Verifier) checkTime(a *Attestation, c *contract.TaskContract) (timing, deadline Step) {
	timing, deadline = Step{Name: StepTiming, Status: StatusOK}, Step{Name: StepDeadline, Status: StatusOK}
	skew := v.ClockSkew
	if skew <= 0 {
		skew = DefaultClockSkew
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	// Both verified, so both parse.
	made, _ := a.Created()
	issued, _ := c.Created()
	due, _ := c.Deadline()
	switch {
	case made.Before(issued.Add(-skew)):
		timing.Status, timing.Detail = StatusInvalid, fmt.Sprintf("made at %s, before its contract (%s)", a.CreatedAt, c.CreatedAt)
	case made.After(now().Add(skew)):
		timing.Status, timing.Detail = StatusInvalid, fmt.Sprintf("made at %s, in the future", a.CreatedAt)
	}
	if made.After(due) {
		deadline.Status, deadline.Detail = StatusFailed, fmt.Sprintf("made at %s, after the deadline %s", a.CreatedAt, c.Constraints.Deadline)
	}
	return timing, deadline
}

// checkChildren verifies each child against its own contract, recursively,
// and adds their reports to r.
func (v *Verifier) checkChildren(ctx context.Context, a *Attestation, c *contract.TaskContract, depth int, w *walk, r *Report) Step {
	s := Step{Name: StepChildren, Status: StatusOK}
	if len(a.ChildAttestations) == 0 {
		s.Status, s.Detail = StatusSkipped, "no children"
		return s
	}
	var problems []string
	note := func(st Status, format string, args ...any) {
		if statusRank[st] > statusRank[s.Status] {
			s.Status = st
		}
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	switch {
	case v.Attestations == nil:
		w.causes = append(w.causes, errors.New("no attestation store to look up child attestations"))
		note(StatusError, "no attestation store to look up child attestations")
	case depth >= MaxDepth:
		note(StatusInvalid, "children nested more than %d levels deep", MaxDepth)
	default:
		var sum int64
		for _, id := range a.ChildAttestations {
			child, st := v.child(ctx, id, w)
			if child == nil {
				note(st.Status, "%s", st.Detail)
				continue
			}
			cr := v.verify(ctx, child, depth+1, w)
			r.Children = append(r.Children, cr)
			sum += child.Result.CostMicrocents
			switch cr.Verdict {
			case Invalid:
				note(StatusInvalid, "child %s is invalid", id)
			case Unverified:
				note(StatusError, "child %s could not be verified", id)
			case Failed:
				note(StatusFailed, "child %s failed", id)
			}
			if cr.ContractIssuer != "" && cr.ContractIssuer != a.Principal {
				note(StatusInvalid, "child %s works under a contract issued by %s, not by this attestation's principal", id, cr.ContractIssuer)
			}
		}
		if sum > c.Constraints.MaxBudgetMicrocents {
			note(StatusInvalid, "children cost %d microcents, over the contract's budget of %d", sum, c.Constraints.MaxBudgetMicrocents)
		}
		if sum > a.Result.CostMicrocents {
			note(StatusInvalid, "children cost %d microcents, more than the %d this attestation reports, which includes them", sum, a.Result.CostMicrocents)
		}
	}
	s.Detail = strings.Join(problems, "; ")
	return s
}

var statusRank = map[Status]int{StatusOK: 0, StatusSkipped: 0, StatusFailed: 1, StatusError: 2, StatusInvalid: 3}

// child looks up one child, refusing repeats and trees over MaxTreeSize.
// On failure it returns nil and the step status and detail to note.
func (v *Verifier) child(ctx context.Context, id string, w *walk) (*Attestation, Step) {
	if w.seen[id] {
		return nil, Step{Status: StatusInvalid, Detail: fmt.Sprintf("child %s appears twice in the tree (a cycle or a shared child)", id)}
	}
	w.seen[id] = true
	if w.count++; w.count > MaxTreeSize {
		return nil, Step{Status: StatusInvalid, Detail: fmt.Sprintf("more than %d attestations in the tree", MaxTreeSize)}
	}
	if err := ctx.Err(); err != nil {
		return nil, w.cause(StepChildren, err)
	}
	child, err := v.Attestations.Get(id)
	if err == nil && child.ID != id {
		err = fmt.Errorf("%w: the store returned attestation %s for %s", ErrMalformed, child.ID, id)
	}
	switch {
	case err == nil:
		return child, Step{}
	case errors.Is(err, fs.ErrNotExist):
		return nil, Step{Status: StatusInvalid, Detail: fmt.Sprintf("child %s not found", id)}
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrInvalidSignature):
		return nil, Step{Status: StatusInvalid, Detail: fmt.Sprintf("child %s: %v", id, err)}
	}
	return nil, w.cause(StepChildren, fmt.Errorf("child %s: %w", id, err))
}

// judged reports whether a spec uses llm_judge or human_review anywhere,
// whose results may differ between runs on the same output.
func judged(s *verify.Spec) bool {
	if s.Method == verify.MethodLLMJudge || s.Method == verify.MethodHumanReview {
		return true
	}
	for i := range s.Steps {
		if judged(&s.Steps[i]) {
			return true
		}
	}
	return false
}
