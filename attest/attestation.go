package attest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/delegateos/delegateos/internal/sig"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/verify"
)

// Version is the only attestation version this package reads and writes.
const Version = "0.1"

// IDPrefix starts every attestation ID; twelve lowercase hex digits follow.
const IDPrefix = "att_"

const idHexLen = 12

// Type says what an attestation attests.
type Type string

const (
	// Completion: the principal did the work of the contract.
	Completion Type = "completion"
	// DelegationVerification: the principal verified work delegated under
	// the contract.
	DelegationVerification Type = "delegation_verification"
)

// Attestation is a signed record of work done under a contract (§7.1).
type Attestation struct {
	// ID is IDPrefix and 12 lowercase hex digits.
	ID           string `json:"id"`
	Version      string `json:"version"`
	ContractID   string `json:"contractId"`
	DelegationID string `json:"delegationId"`
	// DelegationKey, when present, is the key of the delegation the work
	// was done under (dct.Token.DelegationKeys: base64url BLAKE2b-256 of
	// the signed payload of its block), which its ID, a name another
	// delegation may share, does not determine. Signed like every other
	// member. A proxy completes only that delegation with it.
	DelegationKey string `json:"delegationKey,omitempty"`
	// Principal is the principal ID of the attester, which signs.
	Principal string `json:"principal"`
	// CreatedAt is written by timestamp.Format; any RFC 3339 time is read.
	CreatedAt string `json:"createdAt"`
	Type      Type   `json:"type"`
	Result    Result `json:"result"`
	// ChildAttestations are the IDs of the attestations of delegated
	// sub-tasks.
	ChildAttestations []string `json:"childAttestations"`
	// Signature is the principal's base64url Ed25519 signature over the
	// canonical JSON of every other member; omitted when empty, so that
	// the attestation without it is the signed payload.
	Signature string `json:"signature,omitempty"`
}

// Result is what the work produced (§7.1 AttestationResult). Nil members
// are absent.
type Result struct {
	Success bool `json:"success"`
	// Output is any JSON value (null included), in canonical form once
	// created or parsed.
	Output json.RawMessage `json:"output,omitempty"`
	// OutputHash is OutputHash(Output); see the package documentation.
	OutputHash          *string              `json:"outputHash,omitempty"`
	CostMicrocents      int64                `json:"costMicrocents"`
	DurationMs          int64                `json:"durationMs"`
	VerificationOutcome *VerificationOutcome `json:"verificationOutcome,omitempty"`
}

// VerificationOutcome is the attester's claim of how the output fared
// under the contract's verification spec.
type VerificationOutcome struct {
	Method string `json:"method"`
	Passed bool   `json:"passed"`
	// Score is in [0, 1].
	Score   *float64 `json:"score,omitempty"`
	Details *string  `json:"details,omitempty"`
}

// NewOutcome records a verify.CheckResult of a spec with the given method
// as a claimed outcome.
func NewOutcome(method string, r verify.CheckResult) *VerificationOutcome {
	o := &VerificationOutcome{Method: method, Passed: r.Passed}
	if r.Score != nil {
		s := *r.Score
		o.Score = &s
	}
	if r.Details != "" {
		d := r.Details
		o.Details = &d
	}
	return o
}

// NewID returns IDPrefix and 12 random lowercase hex digits read from r
// (crypto/rand.Reader when nil).
func NewID(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	b := make([]byte, idHexLen/2)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("attestation ID: %w", err)
	}
	return IDPrefix + hex.EncodeToString(b), nil
}

// ValidID reports whether id is IDPrefix and 12 lowercase hex digits.
func ValidID(id string) bool {
	if len(id) != len(IDPrefix)+idHexLen || id[:len(IDPrefix)] != IDPrefix {
		return false
	}
	for _, c := range []byte(id[len(IDPrefix):]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// OutputHashPrefix starts every outputHash.
const OutputHashPrefix = "blake2b-256:"

// OutputHash returns OutputHashPrefix and the lowercase hex BLAKE2b-256 of
// the canonical JSON of output. It refuses what an attestation could not
// carry as output (see package contract for the number rules).
func OutputHash(output []byte) (string, error) {
	c, err := canonicalValue(output)
	if err != nil {
		return "", fmt.Errorf("output: %w", err)
	}
	return hashCanonical(c), nil
}

func hashCanonical(c []byte) string {
	d := sig.Digest(c)
	return OutputHashPrefix + hex.EncodeToString(d[:])
}

// Created returns the parsed createdAt.
func (a *Attestation) Created() (time.Time, error) {
	if len(a.CreatedAt) > maxTimestampLen {
		return time.Time{}, malformed("createdAt is %d bytes, longer than any timestamp", len(a.CreatedAt))
	}
	t, err := timestamp.Parse(a.CreatedAt)
	if err != nil {
		return time.Time{}, malformed("createdAt: %v", err)
	}
	return t, nil
}
