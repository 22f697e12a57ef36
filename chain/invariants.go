package chain

import (
	"strconv"

	"github.com/delegateos/delegateos/dct"
)

// checkRoot checks a root record (parentId del_000000000000) and its token.
func checkRoot(d *Delegation, tok *dct.Token) error {
	if d.Depth != 0 {
		return violation(InvariantRoot, d.ID, "a root has depth 0, not %d", d.Depth)
	}
	a := tok.Unverified().Authority
	if tok.Blocks() != 1 {
		return violation(InvariantRoot, d.ID, "a root carries a root token, but this one has %d attenuations", tok.Blocks()-1)
	}
	if a.ParentDelegationID != dct.RootParentDelegationID || a.ChainDepth != 0 {
		return violation(InvariantRoot, d.ID, "the token continues delegation %q at chain depth %d; a root's token starts a chain (parent %s, depth 0)",
			clip(a.ParentDelegationID), a.ChainDepth, dct.RootParentDelegationID)
	}
	if err := checkBinding(d, tok); err != nil {
		return err
	}
	if d.From != a.Issuer {
		return violation(InvariantToken, d.ID, "from is %s, but the token was issued by %s", d.From, a.Issuer)
	}
	return nil
}

// checkChild checks a child record against its (recorded) parent.
func checkChild(parent *rec, d *Delegation, tok *dct.Token) error {
	p := &parent.d
	if p.Status != StatusActive {
		return violation(InvariantParentActive, d.ID, "its parent %s is %s; only an active delegation delegates", p.ID, p.Status)
	}
	if d.From != p.To {
		return violation(InvariantFrom, d.ID, "from is %s, but its parent %s delegated to %s", d.From, p.ID, p.To)
	}
	if d.Depth != p.Depth+1 {
		return violation(InvariantDepth, d.ID, "depth is %d, but its parent %s is at depth %d", d.Depth, p.ID, p.Depth)
	}
	if d.Depth > parent.rootMax {
		return violation(InvariantMaxDepth, d.ID, "depth %d is beyond the root token's maxChainDepth %d", d.Depth, parent.rootMax)
	}
	// The signature count is checked first: a token with fewer signatures
	// than blocks has no prefix to compare.
	if err := checkBinding(d, tok); err != nil {
		return err
	}
	return checkAttenuation(parent, d, tok)
}

// checkAttenuation is §8.2.5, checked rather than trusted: the child's
// token cut after the parent's blocks must serialize to exactly the
// parent's token (the authority, every parent attenuation and every parent
// signature byte for byte), it must add at least one block, and the first
// block it adds must be made by the child's delegator.
func checkAttenuation(parent *rec, d *Delegation, tok *dct.Token) error {
	n := parent.blocks
	if tok.Blocks() <= n {
		return violation(InvariantAttenuation, d.ID, "its token has %d blocks and its parent's %d; a child's token adds at least one", tok.Blocks(), n)
	}
	prefix, err := tok.Prefix(n)
	if err != nil {
		return violation(InvariantAttenuation, d.ID, "its token has no prefix of %d blocks: %v", n, err)
	}
	if prefix.String() != parent.d.DCT.Token {
		return violation(InvariantAttenuation, d.ID, "its token does not begin with the token of its parent %s: %s", parent.d.ID, prefixDifference(parent.d.DCT.Token, tok))
	}
	if first := tok.Unverified().Attenuations[n-1]; first.Attenuator != d.From {
		return violation(InvariantAttenuation, d.ID, "the first block added to the parent's token was made by %s, not by from %s", first.Attenuator, d.From)
	}
	return nil
}

// prefixDifference says where a child's token departs from its parent's,
// for the error message only.
func prefixDifference(parentToken string, child *dct.Token) string {
	pt, err := dct.Parse(parentToken)
	if err != nil {
		return "the parent's token does not parse"
	}
	pids, cids := pt.RevocationIDs(), child.RevocationIDs()
	ps, cs := pt.Unverified().Signatures, child.Unverified().Signatures
	for i := range pids {
		switch {
		case pids[i] != cids[i] && i == 0:
			return "the authority differs"
		case pids[i] != cids[i]:
			return "attenuation " + strconv.Itoa(i-1) + " differs"
		case ps[i] != cs[i]:
			return "the signature of block " + strconv.Itoa(i) + " differs"
		}
	}
	return "the encodings differ"
}

// checkBinding checks that the record describes its token: one signature
// per block, To the last delegatee, ID and ContractID the last block's.
func checkBinding(d *Delegation, tok *dct.Token) error {
	t := tok.Unverified()
	if len(t.Signatures) != tok.Blocks() {
		return violation(InvariantToken, d.ID, "its token has %d blocks but %d signatures", tok.Blocks(), len(t.Signatures))
	}
	delegationID, contractID := t.Authority.DelegationID, t.Authority.ContractID
	if n := len(t.Attenuations); n > 0 {
		delegationID, contractID = t.Attenuations[n-1].DelegationID, t.Attenuations[n-1].ContractID
	}
	if d.To != tok.Delegatee() {
		return violation(InvariantToken, d.ID, "to is %s, but the token is held by %s", d.To, tok.Delegatee())
	}
	if d.ID != delegationID {
		return violation(InvariantToken, d.ID, "the token's last block is delegation %q", clip(delegationID))
	}
	if d.ContractID != contractID {
		return violation(InvariantToken, d.ID, "contractId is %q, but the token's last block names contract %q", clip(d.ContractID), clip(contractID))
	}
	return nil
}
