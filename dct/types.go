package dct

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Format is the only token format this package reads and writes.
const Format = "delegateos-sjt-v1"

// RootParentDelegationID is the parentDelegationId of a root token.
const RootParentDelegationID = "del_000000000000"

// Capability grants an action in a namespace on the resources a glob matches.
type Capability struct {
	Namespace string `json:"namespace"`
	Action    string `json:"action"`
	Resource  string `json:"resource"`
}

func (c Capability) String() string { return c.Namespace + ":" + c.Action + ":" + c.Resource }

// Authority is the root block, signed by Issuer.
type Authority struct {
	Issuer              string       `json:"issuer"`
	Delegatee           string       `json:"delegatee"`
	Capabilities        []Capability `json:"capabilities"`
	ContractID          string       `json:"contractId"`
	DelegationID        string       `json:"delegationId"`
	ParentDelegationID  string       `json:"parentDelegationId"`
	ChainDepth          int64        `json:"chainDepth"`
	MaxChainDepth       int64        `json:"maxChainDepth"`
	MaxBudgetMicrocents int64        `json:"maxBudgetMicrocents"`
	ExpiresAt           string       `json:"expiresAt"`
	IssuedAt            string       `json:"issuedAt"`
}

// Attenuation narrows the token for a new delegatee and is signed by
// Attenuator, the previous delegatee. A nil optional field is unset and
// omitted from the signed bytes; a set zero is a real zero.
type Attenuation struct {
	Attenuator          string        `json:"attenuator"`
	Delegatee           string        `json:"delegatee"`
	DelegationID        string        `json:"delegationId"`
	ContractID          string        `json:"contractId"`
	AllowedCapabilities *[]Capability `json:"allowedCapabilities,omitempty"`
	MaxBudgetMicrocents *int64        `json:"maxBudgetMicrocents,omitempty"`
	ExpiresAt           *string       `json:"expiresAt,omitempty"`
	MaxChainDepth       *int64        `json:"maxChainDepth,omitempty"`
}

// Signature signs one block. Covers is AuthorityBlock for the authority and
// the attenuation index otherwise.
type Signature struct {
	Signer    string `json:"signer"`
	Signature string `json:"signature"`
	Covers    Covers `json:"covers"`
}

// Covers names the block a signature covers: -1 for the authority (written
// "authority"), otherwise the attenuation index (written as a number).
type Covers int

// AuthorityBlock is the Covers value of the authority block.
const AuthorityBlock Covers = -1

// MarshalJSON writes "authority" or the index.
func (c Covers) MarshalJSON() ([]byte, error) {
	if c == AuthorityBlock {
		return []byte(`"authority"`), nil
	}
	if c < 0 {
		return nil, fmt.Errorf("invalid covers %d", int(c))
	}
	return strconv.AppendInt(nil, int64(c), 10), nil
}

// UnmarshalJSON reads "authority" or a non-negative integer index.
func (c *Covers) UnmarshalJSON(b []byte) error {
	if string(b) == `"authority"` {
		*c = AuthorityBlock
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil || n < 0 || n > MaxAttenuations {
		return errors.New(`covers must be "authority" or an attenuation index`)
	}
	*c = Covers(n)
	return nil
}

// SignedToken is the decoded token (§3.1).
type SignedToken struct {
	Format       string        `json:"format"`
	Authority    Authority     `json:"authority"`
	Attenuations []Attenuation `json:"attenuations"`
	Signatures   []Signature   `json:"signatures"`
}

// Serialized is the transport form (§3.2): base64url of the canonical JSON
// of the SignedToken, with its format.
type Serialized struct {
	Token  string `json:"token"`
	Format string `json:"format"`
}
