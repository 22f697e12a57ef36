package reputation

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Sentinel errors; use errors.Is.
var (
	// ErrInvalid: a workspace file, or a value given to this package,
	// breaks the RDP schema (§2, §3, §5) or its validation rules (§6).
	// Errors about files are *ValidationError.
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: no such profile or contract. It wraps fs.ErrNotExist.
	ErrNotFound = fmt.Errorf("not found: %w", fs.ErrNotExist)
	// ErrExists: a contract with that slug already exists.
	ErrExists = fmt.Errorf("already exists: %w", fs.ErrExist)
	// ErrTransition: a contract lifecycle step out of order (§5.7). Errors
	// are *TransitionError.
	ErrTransition = errors.New("contract lifecycle violation")
	// ErrEvaluation: evaluation scores that do not fit the contract's
	// criteria, or criteria weights that do not sum to 1.0.
	ErrEvaluation = errors.New("evaluation refused")
	// ErrConflict: the workspace already holds something else under the
	// name: a profile slug taken by another agent, two profiles claiming
	// one agent, a contract linked to another delegation or other parties.
	ErrConflict = errors.New("conflict")
	// ErrUnsupportedAgent: profiles are created only for Ed25519 agents
	// (principal IDs or did:key); other DIDs are found only in profiles
	// that already exist.
	ErrUnsupportedAgent = errors.New("unsupported agent identifier")
	// ErrSelfDealing: an evaluation in which the delegate would rate its
	// own work. Errors are *SelfDealingError.
	ErrSelfDealing = errors.New("self-dealing")
)

// The ways a delegate can stand on the rating side of its own evaluation.
const (
	// SelfDelegator: the delegate delegated the work to itself.
	SelfDelegator = "delegator"
	// SelfEvaluator: the delegate is the evaluation's source.
	SelfEvaluator = "evaluator"
	// SelfAncestor: the delegate appears earlier in the delegation chain,
	// so the delegator holds its authority from the delegate.
	SelfAncestor = "ancestor"
)

// SelfDealingError is an evaluation refused because its delegate is also
// the delegator, the evaluator or an earlier link of the delegation chain
// (Role says which). Nothing was recorded: no signal, no contract change.
type SelfDealingError struct {
	Contract string // the contract ID, "contract:<slug>"
	Delegate string // the delegate's DID
	Role     string // SelfDelegator, SelfEvaluator or SelfAncestor
}

func (e *SelfDealingError) Error() string {
	how := map[string]string{
		SelfDelegator: "also the delegator",
		SelfEvaluator: "also the evaluator",
		SelfAncestor:  "also a delegator earlier in the delegation chain",
	}[e.Role]
	if how == "" {
		how = "also " + e.Role
	}
	return fmt.Sprintf("%s: no reputation signal recorded: the delegate %s is %s (self-dealing)", e.Contract, e.Delegate, how)
}

// Is makes errors.Is(err, ErrSelfDealing) true.
func (e *SelfDealingError) Is(target error) bool { return target == ErrSelfDealing }

// TransitionError is a lifecycle step the contract's status does not allow.
type TransitionError struct {
	Contract string // the contract ID, "contract:<slug>"
	From     Status // the status the contract has
	To       Status // the status asked for
}

func (e *TransitionError) Error() string {
	want := map[Status]Status{Active: Draft, Completed: Active, Evaluated: Completed}[e.To]
	if want == "" {
		return fmt.Sprintf("%s: cannot move to %q", e.Contract, e.To)
	}
	return fmt.Sprintf("%s is %s; it must be %s to become %s (draft → active → completed → evaluated)", e.Contract, e.From, want, e.To)
}

// Is makes errors.Is(err, ErrTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrTransition }

// Severity says whether a Problem makes a file invalid.
type Severity string

const (
	// SeverityError breaks a MUST of the specification; the file is not
	// loaded and not written to.
	SeverityError Severity = "error"
	// SeverityWarning breaks a SHOULD, or is a hint; the file loads.
	SeverityWarning Severity = "warning"
)

// Problem is one thing wrong with one workspace file.
type Problem struct {
	File     string   `json:"file"`            // path relative to the workspace, e.g. "reputation/bot.md"
	Line     int      `json:"line,omitempty"`  // 1-based line of the file, 0 when not known
	Field    string   `json:"field,omitempty"` // e.g. "signals[3].score"
	Message  string   `json:"message"`
	Severity Severity `json:"severity"`
}

func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Severity == SeverityWarning {
		b.WriteString("warning: ")
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Unwrap makes errors.Is(problem, ErrInvalid) true.
func (p Problem) Unwrap() error { return ErrInvalid }

// ValidationError lists every error-severity problem of a file (or of the
// values given to a call).
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	switch len(e.Problems) {
	case 0:
		return "invalid"
	case 1:
		return e.Problems[0].Error()
	}
	return fmt.Sprintf("%s (and %d more problems)", e.Problems[0].Error(), len(e.Problems)-1)
}

// Unwrap returns the problems, each of which wraps ErrInvalid.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// errorsOnly returns the error-severity problems.
func errorsOnly(ps []Problem) []Problem {
	var out []Problem
	for _, p := range ps {
		if p.Severity == SeverityError {
			out = append(out, p)
		}
	}
	return out
}

// clip shortens untrusted text quoted in an error.
func clip(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
