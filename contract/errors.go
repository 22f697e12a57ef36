package contract

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrMalformed is wrapped by every error about a contract's structure
	// or encoding.
	ErrMalformed = errors.New("malformed contract")
	// ErrInvalidSignature is wrapped when a well-formed contract's
	// signature does not verify against its issuer.
	ErrInvalidSignature = errors.New("contract signature does not verify")
	// ErrDeadlinePassed is wrapped by CheckDeadline when the deadline is past.
	ErrDeadlinePassed = errors.New("contract deadline has passed")
	// ErrConflict is wrapped by Store.Put when the store holds a different
	// contract with the same ID.
	ErrConflict = errors.New("a different contract with this ID is already stored")
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// BindingReason says why a token is not bound to a contract.
type BindingReason string

// The reasons CheckBinding refuses a token.
const (
	// ContractMismatch: the token names another contract, or the contract
	// was not issued by a principal of the token's chain.
	ContractMismatch BindingReason = "contract_mismatch"
	// CapabilityMismatch: the token does not grant every required capability.
	CapabilityMismatch BindingReason = "capability_mismatch"
)

// Sentinels for errors.Is; a *BindingError matches the sentinel of its reason.
var (
	ErrContractMismatch   = &BindingError{Reason: ContractMismatch}
	ErrCapabilityMismatch = &BindingError{Reason: CapabilityMismatch}
)

// BindingError is a token refused by CheckBinding.
type BindingError struct {
	Reason BindingReason
	// ContractID is the contract's ID; TokenContractID the one the token
	// is bound to.
	ContractID, TokenContractID string
	// Missing lists the required capabilities the token does not grant
	// (capability_mismatch).
	Missing []string
	Detail  string
}

func (e *BindingError) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Reason))
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Is reports whether target is a *BindingError with the same reason.
func (e *BindingError) Is(target error) bool {
	t, ok := target.(*BindingError)
	return ok && t.Reason == e.Reason
}
