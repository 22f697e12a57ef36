package chain

import (
	"fmt"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// Status is where a delegation stands (§8.1).
type Status string

// The statuses. Active is the only one that changes.
const (
	StatusActive    Status = "active"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusRevoked   Status = "revoked"
)

// Terminal reports whether s is an ending: completed, failed or revoked.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusRevoked
}

// Delegation is one delegation of the chain (§8.1).
type Delegation struct {
	// ID is "del_" and 12 lowercase hex digits, and is the delegation ID
	// of the token's last block. Whoever attenuates chooses it, so it
	// names the delegation for people but does not identify it: two
	// delegations may share an ID. Key identifies it.
	ID string `json:"id"`
	// ParentID is the parent delegation's ID, or dct.RootParentDelegationID
	// for a root.
	ParentID string `json:"parentId"`
	// Key identifies the delegation: the last of its token's
	// dct.Token.DelegationKeys, derived from the root block and the whole
	// path of signed blocks, so no one below the root can choose it. A
	// store sets it (and ParentKey) from the token on Insert; a record
	// given with either set must carry the token's. Logs written before
	// keys existed hold neither, and are read the same.
	Key string `json:"key,omitempty"`
	// ParentKey is the parent delegation's Key, or empty for a root.
	ParentKey string `json:"parentKey,omitempty"`
	// From and To are the delegator's and the delegatee's principal IDs.
	From string `json:"from"`
	To   string `json:"to"`
	// ContractID is the contract ID of the token's last block.
	ContractID string `json:"contractId"`
	// DCT is the token To holds for this delegation.
	DCT dct.Serialized `json:"dct"`
	// Depth is 0 for a root and the parent's depth + 1 otherwise.
	Depth  int64  `json:"depth"`
	Status Status `json:"status"`
	// CreatedAt and CompletedAt are written as timestamp.Format writes
	// them. CompletedAt is when the delegation ended (completed, failed or
	// revoked) and is empty while it is active.
	CreatedAt   string `json:"createdAt"`
	CompletedAt string `json:"completedAt,omitempty"`
	// AttestationID is "att_" and 12 lowercase hex digits, or empty; it is
	// set only by a completion or failure that names an attestation.
	AttestationID string `json:"attestationId,omitempty"`
}

// IsRoot reports whether d is a root delegation by its parent ID.
func (d *Delegation) IsRoot() bool { return d.ParentID == dct.RootParentDelegationID }

// ValidDelegationID reports whether id is "del_" followed by 12 lowercase
// hex digits.
func ValidDelegationID(id string) bool { return validHexID(id, "del_") }

// ValidAttestationID reports whether id is "att_" followed by 12 lowercase
// hex digits (§7.1).
func ValidAttestationID(id string) bool { return validHexID(id, "att_") }

func validHexID(id, prefix string) bool {
	if len(id) != len(prefix)+idHexLen || id[:len(prefix)] != prefix {
		return false
	}
	for _, c := range []byte(id[len(prefix):]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkNew checks what a record to be inserted must be on its own, before
// its token or the chain is looked at, and parses its token.
func checkNew(d *Delegation) (*dct.Token, error) {
	if !ValidDelegationID(d.ID) {
		return nil, malformed("id %q is not del_ and 12 lowercase hex digits", clip(d.ID))
	}
	if d.ID == dct.RootParentDelegationID {
		return nil, malformed("id %s is reserved for the parent of a root", d.ID)
	}
	if !ValidDelegationID(d.ParentID) {
		return nil, malformed("delegation %s: parentId %q is not del_ and 12 lowercase hex digits", d.ID, clip(d.ParentID))
	}
	if _, err := identity.PublicKey(d.From); err != nil {
		return nil, malformed("delegation %s: from: %v", d.ID, err)
	}
	if _, err := identity.PublicKey(d.To); err != nil {
		return nil, malformed("delegation %s: to: %v", d.ID, err)
	}
	if d.ContractID == "" || len(d.ContractID) > dct.MaxStringLen {
		return nil, malformed("delegation %s: contractId must be 1..%d bytes", d.ID, dct.MaxStringLen)
	}
	if d.Depth < 0 {
		return nil, malformed("delegation %s: depth %d is negative", d.ID, d.Depth)
	}
	if d.Status != StatusActive {
		return nil, malformed("delegation %s: a new delegation is %s, not %q", d.ID, StatusActive, clip(string(d.Status)))
	}
	if _, err := parseTime(d.CreatedAt); err != nil {
		return nil, malformed("delegation %s: createdAt: %v", d.ID, err)
	}
	if d.CompletedAt != "" || d.AttestationID != "" {
		return nil, malformed("delegation %s: a new delegation has no completedAt or attestationId", d.ID)
	}
	tok, err := dct.ParseSerialized(d.DCT)
	if err != nil {
		return nil, fmt.Errorf("%w: delegation %s: dct: %w", ErrMalformed, d.ID, err)
	}
	if err := setKeys(d, tok); err != nil {
		return nil, err
	}
	return tok, nil
}

// setKeys sets a record's Key and ParentKey from its token, refusing a
// record that names others.
func setKeys(d *Delegation, tok *dct.Token) error {
	keys := tok.DelegationKeys()
	key, parent := keys[len(keys)-1], ""
	if len(keys) > 1 {
		// A child may add several blocks: its parent is the last delegation
		// before its own with the parent ID, else the one just before.
		parent = keys[len(keys)-2]
		ids := blockIDs(tok)
		for i := len(ids) - 2; i >= 0; i-- {
			if ids[i] == d.ParentID {
				parent = keys[i]
				break
			}
		}
	}
	if d.Key != "" && d.Key != key || d.ParentKey != "" && d.ParentKey != parent {
		return violation(InvariantToken, d.ID, "key %q or parentKey %q is not the token's", clip(d.Key), clip(d.ParentKey))
	}
	if d.IsRoot() && parent != "" {
		// A root's token has one block: checkRoot says so, naming it.
		parent = ""
	}
	d.Key, d.ParentKey = key, parent
	return nil
}

// blockIDs is the delegation ID of each block of a token, authority first.
func blockIDs(tok *dct.Token) []string {
	t := tok.Unverified()
	ids := []string{t.Authority.DelegationID}
	for _, a := range t.Attenuations {
		ids = append(ids, a.DelegationID)
	}
	return ids
}

// ValidKey reports whether key is written as a delegation key is (43
// base64url characters: 32 bytes).
func ValidKey(key string) bool { return dct.ValidDelegationKey(key) }

// parseTime reads a timestamp that must be in the written form, so that a
// record has one spelling and the log one encoding of it.
func parseTime(s string) (time.Time, error) {
	if len(s) > len(timestamp.Layout) {
		return time.Time{}, fmt.Errorf("%q is not a timestamp", clip(s))
	}
	t, err := timestamp.Parse(s)
	if err != nil {
		return time.Time{}, err
	}
	if timestamp.Format(t) != s {
		return time.Time{}, fmt.Errorf("%q is not written as %s", s, timestamp.Layout)
	}
	return t, nil
}

// formatTime writes at for a record; a zero time, or one a timestamp cannot
// hold, is an error.
func formatTime(at time.Time) (string, error) {
	if at.IsZero() {
		return "", malformed("no time given")
	}
	s := timestamp.Format(at)
	if _, err := parseTime(s); err != nil {
		return "", malformed("time %v: %v", at, err)
	}
	return s, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
