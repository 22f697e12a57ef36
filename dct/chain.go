package dct

import (
	"time"

	"github.com/delegateos/delegateos/internal/sig"
)

// effective is what a token grants after walking its attenuations (§10.1
// step 4).
type effective struct {
	caps         []Capability
	budget       int64
	expires      time.Time
	remaining    int64 // further attenuations the holder may add
	chainDepth   int64 // authority.chainDepth + attenuations
	delegatee    string
	contractID   string
	delegationID string
	links        []ChainLink
}

// ChainLink is one level of the delegation chain with the budget in force
// at that level, root first.
type ChainLink struct {
	DelegationID string `json:"delegationId"`
	// Key identifies the delegation (Token.DelegationKeys): the ID names
	// it for people, but anyone may choose an ID, not a key.
	Key                 string `json:"-"`
	Delegatee           string `json:"delegatee"`
	MaxBudgetMicrocents int64  `json:"maxBudgetMicrocents"`
}

// verifySignatures is §10.1 step 3, without the trusted-root check (which
// the Verifier adds). There must be exactly one signature per block, in
// block order, each naming the block it covers and signed by the block's
// signer: the issuer for the authority, the attenuator for an attenuation.
func (tok *Token) verifySignatures() *Denial {
	t := &tok.t
	if len(t.Signatures) != tok.Blocks() {
		return deny(InvalidSignature, "token has %d blocks but %d signatures", tok.Blocks(), len(t.Signatures))
	}
	s0 := &t.Signatures[0]
	if s0.Covers != AuthorityBlock {
		return deny(InvalidSignature, "signatures[0] must cover the authority")
	}
	if s0.Signer != t.Authority.Issuer {
		return deny(InvalidSignature, "signatures[0].signer is not authority.issuer")
	}
	if sig.VerifyDigest(tok.signers[0], authorityDigest(&tok.enc), tok.sigs[0]) != nil {
		return deny(InvalidSignature, "authority signature does not verify against authority.issuer")
	}
	digests := attenuationDigests(&tok.enc)
	for i := range t.Attenuations {
		s := &t.Signatures[i+1]
		if s.Covers != Covers(i) {
			return deny(InvalidSignature, "signatures[%d] must cover attenuation %d", i+1, i)
		}
		if s.Signer != t.Attenuations[i].Attenuator {
			return deny(InvalidSignature, "signatures[%d].signer is not attenuations[%d].attenuator", i+1, i)
		}
		if sig.VerifyDigest(tok.signers[i+1], digests[i], tok.sigs[i+1]) != nil {
			return deny(InvalidSignature, "attenuation %d signature does not verify against its attenuator", i)
		}
	}
	return nil
}

// walk is §10.1 step 4: every attenuation must be made by the current
// delegatee and may only narrow capabilities, budget, expiry and depth.
//
// Depth: authority.maxChainDepth is the deepest chainDepth the chain may
// reach, so the authority leaves maxChainDepth − chainDepth attenuations.
// Each attenuation uses one; one that sets maxChainDepth sets how many may
// follow it, which must be below what its parent had left.
func (tok *Token) walk() (effective, *Denial) {
	a := &tok.t.Authority
	e := effective{
		caps:         a.Capabilities,
		budget:       a.MaxBudgetMicrocents,
		expires:      tok.expires[0],
		remaining:    a.MaxChainDepth - a.ChainDepth,
		chainDepth:   a.ChainDepth,
		delegatee:    a.Delegatee,
		contractID:   a.ContractID,
		delegationID: a.DelegationID,
		links:        make([]ChainLink, 0, tok.Blocks()),
	}
	if e.remaining < 0 {
		return e, deny(AttenuationViolation, "authority.chainDepth %d exceeds its maxChainDepth %d", a.ChainDepth, a.MaxChainDepth)
	}
	keys := tok.DelegationKeys()
	e.links = append(e.links, ChainLink{DelegationID: a.DelegationID, Key: keys[0], Delegatee: a.Delegatee, MaxBudgetMicrocents: a.MaxBudgetMicrocents})
	for i := range tok.t.Attenuations {
		at := &tok.t.Attenuations[i]
		if at.Attenuator != e.delegatee {
			return e, deny(AttenuationViolation, "attenuator mismatch: attenuation %d is signed by %s, but the token was delegated to %s", i, at.Attenuator, e.delegatee)
		}
		if e.remaining < 1 {
			return e, deny(AttenuationViolation, "chain depth exceeded: attenuation %d goes beyond the allowed depth", i)
		}
		if at.AllowedCapabilities != nil {
			if c, ok := capsSubset(*at.AllowedCapabilities, e.caps); !ok {
				return e, deny(AttenuationViolation, "capability expansion: attenuation %d grants %s, which its parent does not", i, c)
			}
			e.caps = *at.AllowedCapabilities
		}
		if at.MaxBudgetMicrocents != nil {
			if *at.MaxBudgetMicrocents > e.budget {
				return e, deny(AttenuationViolation, "budget expansion: attenuation %d raises the budget from %d to %d", i, e.budget, *at.MaxBudgetMicrocents)
			}
			e.budget = *at.MaxBudgetMicrocents
		}
		if at.ExpiresAt != nil {
			exp := tok.expires[i+1]
			if exp.After(e.expires) {
				return e, deny(AttenuationViolation, "expiry expansion: attenuation %d expires at %s, after its parent", i, *at.ExpiresAt)
			}
			e.expires = exp
		}
		if at.MaxChainDepth != nil {
			if *at.MaxChainDepth >= e.remaining {
				return e, deny(AttenuationViolation, "chain depth expansion: attenuation %d allows %d further delegations, its parent only %d after it", i, *at.MaxChainDepth, e.remaining-1)
			}
			e.remaining = *at.MaxChainDepth
		} else {
			e.remaining--
		}
		e.chainDepth++
		e.delegatee = at.Delegatee
		e.contractID = at.ContractID
		e.delegationID = at.DelegationID
		e.links = append(e.links, ChainLink{DelegationID: at.DelegationID, Key: keys[i+1], Delegatee: at.Delegatee, MaxBudgetMicrocents: e.budget})
	}
	return e, nil
}
