package attest

import "github.com/delegateos/delegateos/verify"

// Verdict is the conclusion of a verification; see the package
// documentation.
type Verdict string

// The verdicts, from best to worst.
const (
	Passed     Verdict = "passed"
	Failed     Verdict = "failed"
	Unverified Verdict = "unverified"
	Invalid    Verdict = "invalid"
)

// StepName names a check.
type StepName string

// The steps of a verification, in the order they are reported. The first
// four are §7.3's.
const (
	// StepSignature: structure, and the signature against the principal.
	StepSignature StepName = "signature"
	// StepContract: the contract named by contractId is found and verifies.
	StepContract StepName = "contract"
	// StepOutputSchema: the output matches the contract's task.outputSchema.
	StepOutputSchema StepName = "output_schema"
	// StepVerification: the contract's verification spec passes the output.
	StepVerification StepName = "verification"
	// StepBudget: costMicrocents is within the contract's budget.
	StepBudget StepName = "budget"
	// StepOutcome: a claimed verification outcome agrees with the
	// recomputed one and with result.success.
	StepOutcome StepName = "outcome"
	// StepTiming: made no earlier than the contract, and not in the future.
	StepTiming StepName = "timing"
	// StepDeadline: made by the contract's deadline.
	StepDeadline StepName = "deadline"
	// StepChildren: every child attestation verifies and their costs fit.
	StepChildren StepName = "children"
)

// Status is how one step came out.
type Status string

const (
	// StatusOK: the check passed.
	StatusOK Status = "ok"
	// StatusSkipped: the check does not apply (no children, no claimed
	// outcome, success=false) or an earlier step made it impossible.
	StatusSkipped Status = "skipped"
	// StatusFailed: the work does not meet the contract (verdict failed).
	StatusFailed Status = "failed"
	// StatusError: the check could not run (verdict unverified).
	StatusError Status = "error"
	// StatusInvalid: the record cannot be trusted (verdict invalid).
	StatusInvalid Status = "invalid"
)

// Step is the result of one check.
type Step struct {
	Name   StepName `json:"name"`
	Status Status   `json:"status"`
	Detail string   `json:"detail,omitempty"`
	// Check is what verify.Verifier returned, for output_schema and
	// verification.
	Check *verify.CheckResult `json:"check,omitempty"`
}

// Report is the outcome of verifying one attestation and, in Children,
// each of its child attestations in order (absent when a child could not
// be looked up).
type Report struct {
	AttestationID string `json:"attestationId"`
	ContractID    string `json:"contractId"`
	// ContractIssuer is the issuer of the contract, when it was found and
	// verified; a verdict is only as meaningful as the contract's issuer
	// is trusted.
	ContractIssuer string    `json:"contractIssuer,omitempty"`
	Principal      string    `json:"principal"`
	Verdict        Verdict   `json:"verdict"`
	Steps          []Step    `json:"steps"`
	Children       []*Report `json:"children,omitempty"`
}

// Step returns the step with the given name.
func (r *Report) Step(name StepName) (Step, bool) {
	for _, s := range r.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}

// statusVerdict is the verdict a step's status imposes.
var statusVerdict = map[Status]Verdict{
	StatusOK: Passed, StatusSkipped: Passed, StatusFailed: Failed,
	StatusError: Unverified, StatusInvalid: Invalid,
}

var verdictRank = map[Verdict]int{Passed: 0, Failed: 1, Unverified: 2, Invalid: 3}

func worse(a, b Verdict) Verdict {
	if verdictRank[b] > verdictRank[a] {
		return b
	}
	return a
}

// add records a step and lowers the verdict accordingly.
func (r *Report) add(s Step) {
	r.Steps = append(r.Steps, s)
	r.Verdict = worse(r.Verdict, statusVerdict[s.Status])
}
