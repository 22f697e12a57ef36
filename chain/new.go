package chain

import (
	"fmt"
	"time"

	"github.com/delegateos/delegateos/dct"
)

// NewRoot returns the record of the root delegation a root token makes:
// from its issuer to its delegatee, created at the given time. It is
// checked as Insert checks a root, apart from what needs the store.
func NewRoot(tok *dct.Token, at time.Time) (Delegation, error) {
	created, err := formatTime(at)
	if err != nil {
		return Delegation{}, err
	}
	a := tok.Unverified().Authority
	d := Delegation{
		ID: a.DelegationID, ParentID: dct.RootParentDelegationID,
		From: a.Issuer, To: tok.Delegatee(), ContractID: lastContractID(tok),
		DCT: tok.Serialized(), Depth: 0, Status: StatusActive, CreatedAt: created,
	}
	r, err := (&state{}).checkInsert(d)
	if err != nil {
		return Delegation{}, err
	}
	return r.d, nil
}

// NewChild returns the record of the delegation the holder of parent's
// token made by attenuating it into tok, created at the given time. It is
// checked as Insert checks a child of parent, apart from what needs the
// store: that parent is recorded as given. The depth limit is read from the
// authority of parent's token, which is the root's in a consistent chain.
func NewChild(parent Delegation, tok *dct.Token, at time.Time) (Delegation, error) {
	created, err := formatTime(at)
	if err != nil {
		return Delegation{}, err
	}
	pt, err := dct.ParseSerialized(parent.DCT)
	if err != nil {
		return Delegation{}, fmt.Errorf("%w: parent %s: dct: %w", ErrMalformed, clip(parent.ID), err)
	}
	t := tok.Unverified()
	n := pt.Blocks()
	if tok.Blocks() <= n {
		return Delegation{}, violation(InvariantAttenuation, "", "the token has %d blocks and its parent's %d; a child's token adds at least one", tok.Blocks(), n)
	}
	last := t.Attenuations[len(t.Attenuations)-1]
	d := Delegation{
		ID: last.DelegationID, ParentID: parent.ID,
		From: t.Attenuations[n-1].Attenuator, To: last.Delegatee, ContractID: last.ContractID,
		DCT: tok.Serialized(), Depth: parent.Depth + 1, Status: StatusActive, CreatedAt: created,
	}
	dr, err := checkNew(&d)
	if err != nil {
		return Delegation{}, err
	}
	p := &rec{d: parent, blocks: n, rootMax: pt.Unverified().Authority.MaxChainDepth}
	if err := checkChild(p, &d, dr); err != nil {
		return Delegation{}, err
	}
	return d, nil
}

// Records returns the records of every delegation a token's chain holds,
// root first, each created at the given time and carrying the token as
// its delegatee received it (dct.Token.Prefix): a proxy that has verified
// a token can record its whole chain, inserting the records its store does
// not hold yet. The token must start a chain (parentDelegationId
// del_000000000000, chainDepth 0).
func Records(tok *dct.Token, at time.Time) ([]Delegation, error) {
	if n := len(tok.Unverified().Signatures); n != tok.Blocks() {
		return nil, violation(InvariantToken, "", "the token has %d blocks but %d signatures", tok.Blocks(), n)
	}
	ds := make([]Delegation, 0, tok.Blocks())
	for n := 1; n <= tok.Blocks(); n++ {
		p, err := tok.Prefix(n)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		var d Delegation
		if n == 1 {
			d, err = NewRoot(p, at)
		} else {
			d, err = NewChild(ds[n-2], p, at)
		}
		if err != nil {
			return nil, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}

func lastContractID(tok *dct.Token) string {
	t := tok.Unverified()
	if n := len(t.Attenuations); n > 0 {
		return t.Attenuations[n-1].ContractID
	}
	return t.Authority.ContractID
}
