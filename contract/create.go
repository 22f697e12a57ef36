package contract

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

// CreateParams describe a new contract.
type CreateParams struct {
	// ID is the contract ID; empty means a new one from NewID(Rand).
	ID   string
	Rand io.Reader
	// Issuer, when set, is the principal ID or did:key the caller expects
	// the signing key to have; Create refuses a key that does not match.
	// The contract always records the principal ID.
	Issuer      string
	Title       string
	Description string
	// Inputs is a JSON object; nil means {}.
	Inputs json.RawMessage
	// OutputSchema is a JSON Schema (draft-07) object. Required.
	OutputSchema json.RawMessage
	// Verification is a VerificationSpec (§6.1). Required.
	Verification        json.RawMessage
	MaxBudgetMicrocents int64
	// Deadline must be after the creation time.
	Deadline             time.Time
	MaxChainDepth        int64
	RequiredCapabilities []string
}

// Create builds a contract and signs it with key. A zero now means
// time.Now(); createdAt and the deadline are written to the millisecond.
func Create(key *identity.Keypair, p CreateParams, now time.Time) (*TaskContract, error) {
	if key == nil {
		return nil, errors.New("no issuer key")
	}
	if p.Issuer != "" {
		id, err := identity.NormalizePrincipal(p.Issuer)
		if err != nil {
			return nil, fmt.Errorf("issuer: %w", err)
		}
		if id != key.ID() {
			return nil, fmt.Errorf("issuer %s is not the signing key's principal %s", clip(p.Issuer), key.ID())
		}
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
	for _, t := range []time.Time{now, p.Deadline} {
		if y := t.UTC().Year(); y < 0 || y > 9999 {
			return nil, fmt.Errorf("time %s is outside the years 0000..9999 a timestamp can hold", t)
		}
	}
	inputs := p.Inputs
	if inputs == nil {
		inputs = json.RawMessage("{}")
	}
	required := append([]string{}, p.RequiredCapabilities...)
	c := &TaskContract{
		ID:        id,
		Version:   Version,
		Issuer:    key.ID(),
		CreatedAt: timestamp.Format(now),
		Task: Task{
			Title:        p.Title,
			Description:  p.Description,
			Inputs:       inputs,
			OutputSchema: p.OutputSchema,
		},
		Verification: p.Verification,
		Constraints: Constraints{
			MaxBudgetMicrocents:  p.MaxBudgetMicrocents,
			Deadline:             timestamp.Format(p.Deadline),
			MaxChainDepth:        p.MaxChainDepth,
			RequiredCapabilities: required,
		},
	}
	if err := c.normalize(); err != nil {
		return nil, err
	}
	if _, err := c.checkUnsigned(); err != nil {
		return nil, err
	}
	payload, err := c.signedPayload()
	if err != nil {
		return nil, err
	}
	c.Signature = sig.SignCanonical(key.PrivateKey(), payload)
	return c, nil
}
