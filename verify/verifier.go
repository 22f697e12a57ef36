package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Verifier verifies outputs against specs (§10.3). The zero value uses the
// built-in checks and has no judge and no reviewer.
type Verifier struct {
	// Registry holds the check functions; nil means the seven built-ins
	// (DefaultRegistry).
	Registry *Registry
	// Judge runs llm_judge evaluations. nil: a spec using llm_judge or
	// human_review (which escalates to it) is an error (ErrNoJudge),
	// never a pass.
	Judge Judge
	// Reviewer answers human_review. nil: a spec using human_review is an
	// error (ErrNoReviewer). It does not escalate to llm_judge at once: the
	// contract asked for a human, and a judge replaces one only after a
	// human was asked and did not answer in time.
	Reviewer Reviewer
	// ReviewTimeout is how long human_review waits for the Reviewer when
	// the spec has no timeoutMs; 0 means DefaultReviewTimeout (24 h).
	ReviewTimeout time.Duration
	// Warn receives warnings: llm_judge scores that spread more than
	// SpreadWarning. nil discards them.
	Warn func(msg string)
}

func (v *Verifier) warn(msg string) {
	if v.Warn != nil {
		v.Warn(msg)
	}
}

// run is one Verify call.
type run struct {
	ctx      context.Context
	v        *Verifier
	registry *Registry
	task     Task
	raw      json.RawMessage
	output   any
	path     string // the spec being evaluated, for errors
}

// Verify checks output against spec and returns the result, or an error
// when the result cannot be decided: an invalid spec (ErrInvalidSpec), an
// unknown check (ErrUnknownCheck), bad check params (ErrBadParams), an
// output that is not one bounded, unambiguous JSON value
// (ErrInvalidOutput), a score outside [0, 1] (ErrBadResult), a missing or
// failing judge or reviewer, or ctx's error. An error is never a pass.
//
// The spec is validated first and every check name is looked up before any
// check runs, so an unknown name is an error even where all_pass would
// have stopped before reaching it.
func (v *Verifier) Verify(ctx context.Context, spec *Spec, task Task, output json.RawMessage) (CheckResult, error) {
	if spec == nil {
		return CheckResult{}, specErr("spec", "nil spec")
	}
	if err := spec.Validate(); err != nil {
		return CheckResult{}, err
	}
	if len(output) > MaxOutputLen {
		return CheckResult{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidOutput, MaxOutputLen)
	}
	decoded, err := decodeValue(output)
	if err != nil {
		return CheckResult{}, fmt.Errorf("%w: %v", ErrInvalidOutput, err)
	}
	r := &run{ctx: ctx, v: v, registry: v.Registry, task: task, raw: output, output: decoded}
	if r.registry == nil {
		r.registry = defaultRegistry()
	}
	if err := r.preflight(spec, "spec"); err != nil {
		return CheckResult{}, err
	}
	res, err := r.step(spec, "spec")
	if err != nil {
		return CheckResult{}, err
	}
	res.Details = truncate(res.Details, MaxDetailsLen)
	return res, nil
}

// preflight looks up every check and makes sure the judge and reviewer the
// spec needs are there, before anything runs.
func (r *run) preflight(s *Spec, path string) error {
	switch s.Method {
	case MethodDeterministicCheck:
		if _, err := r.registry.Get(s.CheckName); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	case MethodLLMJudge:
		if r.v.Judge == nil {
			return fmt.Errorf("%s: %w", path, ErrNoJudge)
		}
	case MethodHumanReview:
		if r.v.Reviewer == nil {
			return fmt.Errorf("%s: %w", path, ErrNoReviewer)
		}
		if r.v.Judge == nil {
			return fmt.Errorf("%s: %w (human_review escalates to llm_judge)", path, ErrNoJudge)
		}
	case MethodComposite:
		for i := range s.Steps {
			if err := r.preflight(&s.Steps[i], fmt.Sprintf("%s.steps[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// step evaluates one spec of the tree.
func (r *run) step(s *Spec, path string) (CheckResult, error) {
	if err := r.ctx.Err(); err != nil {
		return CheckResult{}, err
	}
	saved := r.path
	r.path = path
	defer func() { r.path = saved }()
	var res CheckResult
	var err error
	switch s.Method {
	case MethodSchemaMatch:
		res, err = r.evalSchema(s)
	case MethodDeterministicCheck:
		res, err = r.evalCheck(s)
	case MethodComposite:
		res, err = r.evalComposite(s)
	case MethodLLMJudge:
		res, err = r.evalJudge(s)
	case MethodHumanReview:
		res, err = r.evalReview(s)
	default:
		err = specErr(path, "unknown method %q", s.Method)
	}
	if err != nil {
		if _, isSpec := err.(*SpecError); isSpec || isStepError(err) {
			return CheckResult{}, err
		}
		return CheckResult{}, &StepError{Path: path, Err: err}
	}
	if err := checkResult(res); err != nil {
		return CheckResult{}, &StepError{Path: path, Err: err}
	}
	return res, nil
}

// evalSchema runs schema_match (§10.3).
func (r *run) evalSchema(s *Spec) (CheckResult, error) {
	sch, err := compileSchema(s.Schema)
	if err != nil {
		return CheckResult{}, specErr(r.path, "%v", err)
	}
	return validateSchema(sch, r.output)
}
