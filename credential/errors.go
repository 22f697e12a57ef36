package credential

import (
	"errors"
	"fmt"
	"strconv"
)

// The kinds of failure. Every error Verify returns is an *Error whose Err
// wraps one of them.
var (
	// ErrMalformed: the bytes are not a credential this package can read
	// (size, JSON, duplicate members, numbers, a member of the wrong type).
	ErrMalformed = errors.New("malformed credential")
	// ErrUnsupported: a proof this package does not verify (another
	// cryptosuite, a proof set or chain, a key that is not a did:key).
	ErrUnsupported = errors.New("unsupported proof")
	// ErrInvalidProof: the proof breaks a rule of Data Integrity or
	// eddsa-jcs-2022 (purpose, @context, dates).
	ErrInvalidProof = errors.New("invalid proof")
	// ErrSignature: the Ed25519 signature does not verify.
	ErrSignature = errors.New("invalid signature")
	// ErrUntrustedSigner: the proof is valid but not by the signer asked for.
	ErrUntrustedSigner = errors.New("untrusted signer")
	// ErrExpired: validUntil, or the proof's expires, is past.
	ErrExpired = errors.New("expired")
	// ErrNotYetValid: validFrom is in the future.
	ErrNotYetValid = errors.New("not yet valid")
	// ErrShape: the credential breaks a rule of the VC data model or of its
	// credential type.
	ErrShape = errors.New("credential shape")
)

// Error is a failed check: which one, and why.
type Error struct {
	// Check names what was checked: "json", "proof", "verificationMethod",
	// "@context", "signature", "credential", "validity", ...
	Check string
	// Err wraps one of the Err* sentinels.
	Err error
}

func (e *Error) Error() string { return e.Check + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func fail(check string, kind error, format string, args ...any) *Error {
	return &Error{Check: check, Err: fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))}
}

// quote shows an untrusted string Go-quoted and clipped, so that it cannot
// forge lines or terminal controls in a message.
func quote(s string) string {
	if len(s) > maxStringShown {
		s = s[:maxStringShown] + "…"
	}
	return strconv.Quote(s)
}
