package dct

import "fmt"

// DenialType is one of the specification's reasons for refusing a token.
type DenialType string

// The denial types of §10.1.
const (
	Malformed            DenialType = "malformed_token"
	Revoked              DenialType = "revoked"
	InvalidSignature     DenialType = "invalid_signature"
	AttenuationViolation DenialType = "attenuation_violation"
	Expired              DenialType = "expired"
	BudgetExceeded       DenialType = "budget_exceeded"
	CapabilityNotGranted DenialType = "capability_not_granted"
)

// Sentinels for errors.Is; a *Denial matches the sentinel of its type.
var (
	ErrMalformed            = &Denial{Type: Malformed}
	ErrRevoked              = &Denial{Type: Revoked}
	ErrInvalidSignature     = &Denial{Type: InvalidSignature}
	ErrAttenuationViolation = &Denial{Type: AttenuationViolation}
	ErrExpired              = &Denial{Type: Expired}
	ErrBudgetExceeded       = &Denial{Type: BudgetExceeded}
	ErrCapabilityNotGranted = &Denial{Type: CapabilityNotGranted}
)

// Denial is a refused token or request. Requested and Granted are set for
// capability_not_granted, RevocationID for revoked.
type Denial struct {
	Type         DenialType   `json:"type"`
	Detail       string       `json:"detail,omitempty"`
	RevocationID string       `json:"revocationId,omitempty"`
	Requested    *Capability  `json:"requested,omitempty"`
	Granted      []Capability `json:"granted,omitempty"`
	// cause is the error that made the denial, when one did (a revocation
	// list that could not be read).
	cause error
}

func (d *Denial) Error() string {
	if d.Detail == "" {
		return string(d.Type)
	}
	return string(d.Type) + ": " + d.Detail
}

// Unwrap returns the error that made the denial, if any: a revocation
// list's error, for a token denied because the list could not be read.
func (d *Denial) Unwrap() error { return d.cause }

// Is reports whether target is a *Denial of the same type.
func (d *Denial) Is(target error) bool {
	t, ok := target.(*Denial)
	return ok && t.Type == d.Type
}

func deny(t DenialType, format string, args ...any) *Denial {
	return &Denial{Type: t, Detail: fmt.Sprintf(format, args...)}
}
