package dct

import (
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// Inspection describes a token for people: every block as written, what
// the chain grants, and whether the signatures are consistent with the
// keys the token names. It does not check the issuer against trusted roots,
// revocation or time; only a Verifier decides whether a token is good.
type Inspection struct {
	Format string  `json:"format"`
	Blocks []Block `json:"blocks"`
	// SignaturesValid reports the signature checks against the keys named
	// in the token; SignatureProblem says what failed.
	SignaturesValid  bool   `json:"signaturesValid"`
	SignatureProblem string `json:"signatureProblem,omitempty"`
	// Effective is what the token grants if its chain is valid; ChainProblem
	// says why it is not.
	Effective    *Effective `json:"effective,omitempty"`
	ChainProblem string     `json:"chainProblem,omitempty"`
}

// Block is one block of a token as written.
type Block struct {
	Index        int    `json:"index"`
	Kind         string `json:"kind"` // "authority" or "attenuation"
	RevocationID string `json:"revocationId"`
	Signer       string `json:"signer"`
	SignerDID    string `json:"signerDid"`
	Delegatee    string `json:"delegatee"`
	DelegateeDID string `json:"delegateeDid"`
	ContractID   string `json:"contractId"`
	DelegationID string `json:"delegationId"`
	// Authority only.
	ParentDelegationID string `json:"parentDelegationId,omitempty"`
	ChainDepth         *int64 `json:"chainDepth,omitempty"`
	IssuedAt           string `json:"issuedAt,omitempty"`
	// Unset in an attenuation means inherited from the parent.
	Capabilities        *[]Capability `json:"capabilities,omitempty"`
	MaxBudgetMicrocents *int64        `json:"maxBudgetMicrocents,omitempty"`
	ExpiresAt           *string       `json:"expiresAt,omitempty"`
	MaxChainDepth       *int64        `json:"maxChainDepth,omitempty"`
}

// Effective is what a token grants after its attenuations.
type Effective struct {
	Holder              string       `json:"holder"`
	Capabilities        []Capability `json:"capabilities"`
	MaxBudgetMicrocents int64        `json:"maxBudgetMicrocents"`
	ExpiresAt           string       `json:"expiresAt"`
	ChainDepth          int64        `json:"chainDepth"`
	MaxChainDepth       int64        `json:"maxChainDepth"`
	ContractID          string       `json:"contractId"`
	DelegationID        string       `json:"delegationId"`
}

// Inspect describes the token. The Inspection is the caller's own copy.
func (tok *Token) Inspect() Inspection {
	ins := Inspection{Format: tok.t.Format}
	ids := tok.RevocationIDs()
	t := tok.Unverified() // the blocks point into it
	a := t.Authority
	caps := a.Capabilities
	depth, budget, exp, maxDepth := a.ChainDepth, a.MaxBudgetMicrocents, a.ExpiresAt, a.MaxChainDepth
	ins.Blocks = append(ins.Blocks, Block{
		Index: 0, Kind: "authority", RevocationID: ids[0],
		Signer: a.Issuer, SignerDID: did(a.Issuer), Delegatee: a.Delegatee, DelegateeDID: did(a.Delegatee),
		ContractID: a.ContractID, DelegationID: a.DelegationID, ParentDelegationID: a.ParentDelegationID,
		ChainDepth: &depth, IssuedAt: a.IssuedAt,
		Capabilities: &caps, MaxBudgetMicrocents: &budget, ExpiresAt: &exp, MaxChainDepth: &maxDepth,
	})
	for i, at := range t.Attenuations {
		ins.Blocks = append(ins.Blocks, Block{
			Index: i + 1, Kind: "attenuation", RevocationID: ids[i+1],
			Signer: at.Attenuator, SignerDID: did(at.Attenuator), Delegatee: at.Delegatee, DelegateeDID: did(at.Delegatee),
			ContractID: at.ContractID, DelegationID: at.DelegationID,
			Capabilities: at.AllowedCapabilities, MaxBudgetMicrocents: at.MaxBudgetMicrocents,
			ExpiresAt: at.ExpiresAt, MaxChainDepth: at.MaxChainDepth,
		})
	}
	if d := tok.verifySignatures(); d != nil {
		ins.SignatureProblem = d.Detail
	} else {
		ins.SignaturesValid = true
	}
	e, d := tok.walk()
	if d != nil {
		ins.ChainProblem = d.Detail
		return ins
	}
	ins.Effective = &Effective{
		Holder: e.delegatee, Capabilities: cloneSlice(e.caps), MaxBudgetMicrocents: e.budget,
		ExpiresAt: timestamp.Format(e.expires), ChainDepth: e.chainDepth, MaxChainDepth: e.chainDepth + e.remaining,
		ContractID: e.contractID, DelegationID: e.delegationID,
	}
	return ins
}

func did(id string) string {
	d, err := identity.DIDFromPrincipalID(id)
	if err != nil {
		return ""
	}
	return d
}
