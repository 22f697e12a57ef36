package contract

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/verify"
)

// Version is the only contract version this package reads and writes.
const Version = "0.1"

// IDPrefix starts every contract ID; twelve lowercase hex digits follow.
const IDPrefix = "ct_"

const idHexLen = 12

// TaskContract is a signed task contract (§5.1). The free-form members
// (Task.Inputs, Task.OutputSchema, Verification) hold canonical JSON once
// the contract has been created or parsed.
type TaskContract struct {
	// ID is IDPrefix and 12 lowercase hex digits.
	ID      string `json:"id"`
	Version string `json:"version"`
	// Issuer is the principal ID of the signer.
	Issuer string `json:"issuer"`
	// CreatedAt is written by timestamp.Format; any RFC 3339 time is read.
	CreatedAt string `json:"createdAt"`
	Task      Task   `json:"task"`
	// Verification is the VerificationSpec (§6.1), kept as the JSON the
	// issuer signed and read with verify.ParseSpec.
	Verification json.RawMessage `json:"verification"`
	Constraints  Constraints     `json:"constraints"`
	// Signature is the issuer's base64url Ed25519 signature over the
	// canonical JSON of every other member. It is omitted when empty, so
	// that the contract without it is the signed payload.
	Signature string `json:"signature,omitempty"`
}

// Task is what is asked for (§5.1 TaskSpec).
type Task struct {
	Title       string `json:"title"`
	Description string `json:"description"`
	// Inputs is a JSON object.
	Inputs json.RawMessage `json:"inputs"`
	// OutputSchema is a JSON Schema (draft-07) object the output must satisfy.
	OutputSchema json.RawMessage `json:"outputSchema"`
}

// Constraints bound the work (§5.1 TaskConstraints).
type Constraints struct {
	// MaxBudgetMicrocents is at most canon.MaxSafeInteger.
	MaxBudgetMicrocents int64 `json:"maxBudgetMicrocents"`
	// Deadline is an RFC 3339 time after CreatedAt.
	Deadline string `json:"deadline"`
	// MaxChainDepth is at most canon.MaxSafeInteger.
	MaxChainDepth int64 `json:"maxChainDepth"`
	// RequiredCapabilities are "namespace:action" strings; see
	// ParseRequirement.
	RequiredCapabilities []string `json:"requiredCapabilities"`
}

// NewID returns IDPrefix and 12 random lowercase hex digits read from r
// (crypto/rand.Reader when nil).
func NewID(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	b := make([]byte, idHexLen/2)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("contract ID: %w", err)
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

// Deadline returns the parsed constraints.deadline.
func (c *TaskContract) Deadline() (time.Time, error) {
	return parseTime("constraints.deadline", c.Constraints.Deadline)
}

// Created returns the parsed createdAt.
func (c *TaskContract) Created() (time.Time, error) {
	return parseTime("createdAt", c.CreatedAt)
}

// CheckDeadline returns an error wrapping ErrDeadlinePassed when now is
// after the deadline, and ErrMalformed when the deadline does not parse.
func (c *TaskContract) CheckDeadline(now time.Time) error {
	d, err := c.Deadline()
	if err != nil {
		return err
	}
	if now.After(d) {
		return fmt.Errorf("%w: contract %s was due at %s", ErrDeadlinePassed, c.ID, c.Constraints.Deadline)
	}
	return nil
}

// Spec parses the verification spec with verify.ParseSpec.
func (c *TaskContract) Spec() (*verify.Spec, error) {
	s, err := verify.ParseSpec(c.Verification)
	if err != nil {
		return nil, malformed("verification: %v", err)
	}
	return s, nil
}

// VerifyTask is the task as verify.Verifier needs it (an llm_judge prompt
// shows it to the judge).
func (c *TaskContract) VerifyTask() verify.Task {
	return verify.Task{Title: c.Task.Title, Description: c.Task.Description, OutputSchema: c.Task.OutputSchema}
}

// Marshal returns the contract as canonical JSON, signature included.
func (c *TaskContract) Marshal() ([]byte, error) {
	if _, _, err := c.checkStructure(); err != nil {
		return nil, err
	}
	return c.canonical()
}

func parseTime(name, s string) (time.Time, error) {
	if len(s) > maxTimestampLen {
		return time.Time{}, malformed("%s is %d bytes, longer than any timestamp", name, len(s))
	}
	t, err := timestamp.Parse(s)
	if err != nil {
		return time.Time{}, malformed("%s: %v", name, err)
	}
	return t, nil
}
