package attest

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrMalformed is wrapped by every error about an attestation's
	// structure or encoding.
	ErrMalformed = errors.New("malformed attestation")
	// ErrInvalidSignature is wrapped when a well-formed attestation's
	// signature does not verify against its principal.
	ErrInvalidSignature = errors.New("attestation signature does not verify")
	// ErrConflict is wrapped by Store.Put when the store holds a different
	// attestation with the same ID.
	ErrConflict = errors.New("a different attestation with this ID is already stored")

	// ErrInvalid is matched by a VerifyError whose verdict is Invalid.
	ErrInvalid = errors.New("attestation is invalid")
	// ErrFailed is matched by a VerifyError whose verdict is Failed.
	ErrFailed = errors.New("attested work does not meet its contract")
	// ErrUnverified is matched by a VerifyError whose verdict is Unverified.
	ErrUnverified = errors.New("attestation could not be verified")
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// VerifyError is returned by Verifier.Verify for every verdict but Passed.
// It unwraps to the verdict's sentinel and to the errors that made checks
// fail to run.
type VerifyError struct {
	AttestationID string
	Verdict       Verdict
	// Steps are the steps that did not pass, with what they found.
	Steps  []Step
	causes []error
}

func (e *VerifyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "attestation %s: %s", e.AttestationID, e.Verdict)
	for i, s := range e.Steps {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %s", s.Name, s.Status)
		if s.Detail != "" {
			b.WriteString(" (" + s.Detail + ")")
		}
	}
	return b.String()
}

// Unwrap returns the verdict's sentinel and the causes of checks that
// could not run (a context error, a store error).
func (e *VerifyError) Unwrap() []error {
	var errs []error
	if s := verdictErrors[e.Verdict]; s != nil {
		errs = append(errs, s)
	}
	return append(errs, e.causes...)
}

var verdictErrors = map[Verdict]error{Invalid: ErrInvalid, Failed: ErrFailed, Unverified: ErrUnverified}
