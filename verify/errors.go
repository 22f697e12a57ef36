package verify

import (
	"errors"
	"fmt"
)

// Sentinels for errors.Is. Every error Verify returns wraps one of them or
// a context error; none of them is ever a pass.
var (
	// ErrInvalidSpec: the spec is malformed or inconsistent (see SpecError).
	ErrInvalidSpec = errors.New("invalid verification spec")
	// ErrUnknownCheck: a deterministic_check names a check the registry
	// does not hold.
	ErrUnknownCheck = errors.New("unknown check function")
	// ErrBadParams: a check's params are malformed, of the wrong type, have
	// unknown members or lack required ones (see ParamsError).
	ErrBadParams = errors.New("bad check params")
	// ErrInvalidOutput: the output is not one bounded, unambiguous JSON
	// value.
	ErrInvalidOutput = errors.New("invalid output")
	// ErrBadResult: a check, judge or reviewer returned a score that is
	// NaN, infinite or outside [0, 1].
	ErrBadResult = errors.New("invalid check result")
	// ErrBadJudgeReply: a judge's reply is not exactly a JSON object with a
	// numeric score in [0, 1] and a reasoning string.
	ErrBadJudgeReply = errors.New("invalid judge reply")
	// ErrJudge: the judge could not be run (CommandJudge: the command
	// failed, timed out or wrote too much).
	ErrJudge = errors.New("judge failed")
	// ErrNoJudge: the spec uses llm_judge (or human_review, which escalates
	// to it) and the Verifier has no Judge.
	ErrNoJudge = errors.New("no judge configured")
	// ErrNoReviewer: the spec uses human_review and the Verifier has no
	// Reviewer.
	ErrNoReviewer = errors.New("no reviewer configured")
	// ErrDuplicateCheck: Register was given a name already registered.
	ErrDuplicateCheck = errors.New("check function already registered")
)

// SpecError is a spec that fails validation. Path locates the offending
// spec from the top ("spec", "spec.steps[2]", ...).
type SpecError struct {
	Path   string
	Reason string
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalidSpec, e.Path, e.Reason)
}

// Unwrap makes a SpecError match ErrInvalidSpec.
func (e *SpecError) Unwrap() error { return ErrInvalidSpec }

// ParamsError is a check that refused its params.
type ParamsError struct {
	Check  string
	Reason string
}

func (e *ParamsError) Error() string {
	return fmt.Sprintf("%v for %s: %s", ErrBadParams, e.Check, e.Reason)
}

// Unwrap makes a ParamsError match ErrBadParams.
func (e *ParamsError) Unwrap() error { return ErrBadParams }

func specErr(path, format string, args ...any) *SpecError {
	return &SpecError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

func paramsErr(check, format string, args ...any) *ParamsError {
	return &ParamsError{Check: check, Reason: fmt.Sprintf(format, args...)}
}

// StepError is an error from evaluating the spec at Path; it wraps the
// cause, so errors.Is sees the sentinel underneath.
type StepError struct {
	Path string
	Err  error
}

func (e *StepError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.Err }

func isStepError(err error) bool {
	_, ok := err.(*StepError)
	return ok
}
