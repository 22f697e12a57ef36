package attest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/sig"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// CreateParams describe a new attestation.
type CreateParams struct {
	// ID is the attestation ID; empty means a new one from NewID(Rand).
	ID           string
	Rand         io.Reader
	ContractID   string
	DelegationID string
	// DelegationKey is the delegation's key; empty means none recorded.
	DelegationKey string
	// Type defaults to Completion.
	Type    Type
	Success bool
	// Output is any JSON value; nil means no output.
	Output json.RawMessage
	// HashOnly records OutputHash(Output) instead of the output, for work
	// whose output must not travel with the attestation.
	HashOnly       bool
	CostMicrocents int64
	DurationMs     int64
	// Outcome is the claimed verification outcome; nil means none.
	Outcome *VerificationOutcome
	// Children are the IDs of the attestations of delegated sub-tasks.
	Children []string
}

// Create builds an attestation and signs it with key, whose principal it
// records. A zero now means time.Now().
func Create(key *identity.Keypair, p CreateParams, now time.Time) (*Attestation, error) {
	if key == nil {
		return nil, errors.New("no attester key")
	}
	id := p.ID
	if id == "" {
		var err error
		if id, err = NewID(p.Rand); err != nil {
			return nil, err
		}
	}
	if now.IsZero() {
		now = time.Now()
	}
	if y := now.UTC().Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("time %s is outside the years 0000..9999 a timestamp can hold", now)
	}
	if p.Type == "" {
		p.Type = Completion
	}
	a := &Attestation{
		ID:            id,
		Version:       Version,
		ContractID:    p.ContractID,
		DelegationID:  p.DelegationID,
		DelegationKey: p.DelegationKey,
		Principal:     key.ID(),
		CreatedAt:     timestamp.Format(now),
		Type:          p.Type,
		Result: Result{
			Success:        p.Success,
			CostMicrocents: p.CostMicrocents,
			DurationMs:     p.DurationMs,
		},
		ChildAttestations: append([]string{}, p.Children...),
	}
	if p.Outcome != nil {
		o := *p.Outcome
		a.Result.VerificationOutcome = &o
	}
	if p.Output != nil {
		c, err := canonicalValue(p.Output)
		if err != nil {
			return nil, malformed("output: %v", err)
		}
		if p.HashOnly {
			h := hashCanonical(c)
			a.Result.OutputHash = &h
		} else {
			a.Result.Output = c
		}
	} else if p.HashOnly {
		return nil, errors.New("HashOnly without an output")
	}
	if _, err := a.checkUnsigned(); err != nil {
		return nil, err
	}
	payload, err := a.signedPayload()
	if err != nil {
		return nil, err
	}
	a.Signature = sig.SignCanonical(key.PrivateKey(), payload)
	return a, nil
}
