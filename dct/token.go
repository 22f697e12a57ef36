package dct

import (
	"fmt"

	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/sig"
)

// String is the serialized token: base64url of its canonical JSON.
func (tok *Token) String() string { return tok.raw }

// Serialized is the {token, format} transport form.
func (tok *Token) Serialized() Serialized { return Serialized{Token: tok.raw, Format: Format} }

// Unverified returns a copy of the decoded token as written. Nothing in it
// is trustworthy until a Verifier has accepted the token.
func (tok *Token) Unverified() SignedToken { return cloneToken(&tok.t) }

// cloneToken is a deep copy: the chain walk reads the token's own slices and
// pointers, so a caller changing a copy must not change what is verified.
// Empty and nil slices stay as they were, since they encode differently.
func cloneToken(src *SignedToken) SignedToken {
	t := *src
	t.Authority.Capabilities = cloneSlice(t.Authority.Capabilities)
	t.Attenuations = cloneSlice(t.Attenuations)
	for i := range t.Attenuations {
		a := &t.Attenuations[i]
		if a.AllowedCapabilities != nil {
			caps := cloneSlice(*a.AllowedCapabilities)
			a.AllowedCapabilities = &caps
		}
		a.MaxBudgetMicrocents = clonePtr(a.MaxBudgetMicrocents)
		a.ExpiresAt = clonePtr(a.ExpiresAt)
		a.MaxChainDepth = clonePtr(a.MaxChainDepth)
	}
	t.Signatures = cloneSlice(t.Signatures)
	return t
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Blocks is the number of blocks: the authority plus each attenuation.
func (tok *Token) Blocks() int { return 1 + len(tok.t.Attenuations) }

// RevocationIDs returns the revocation ID of each block (§3.5):
// base64url(BLAKE2b-256(canonical block)), authority first.
func (tok *Token) RevocationIDs() []string {
	ids := make([]string, 0, tok.Blocks())
	ids = append(ids, blockRevocationID(tok.enc.authority.of(tok.enc.all)))
	for _, s := range tok.enc.attenuation {
		ids = append(ids, blockRevocationID(s.of(tok.enc.all)))
	}
	return ids
}

func blockRevocationID(block []byte) string {
	d := sig.Digest(block)
	return b64.Encode(d[:])
}

// DelegationKeys returns the key of each delegation the token's chain
// holds, root first: base64url of the BLAKE2b-256 digest its block's
// signature covers. That payload is the authority and every attenuation up
// to the block (§3.4), so a key names one delegation by its root and its
// whole path of blocks, which only their signers could have written.
// Delegation IDs are chosen by whoever attenuates, so anyone holding a
// token from a root can pick another principal's; a key cannot be chosen,
// and two delegations that share an ID have different keys.
func (tok *Token) DelegationKeys() []string {
	keys := make([]string, 0, tok.Blocks())
	d := authorityDigest(&tok.enc)
	keys = append(keys, b64.Encode(d[:]))
	for _, d := range attenuationDigests(&tok.enc) {
		keys = append(keys, b64.Encode(d[:]))
	}
	return keys
}

// ValidDelegationKey reports whether key is written as DelegationKeys
// writes one: 43 base64url characters, 32 bytes.
func ValidDelegationKey(key string) bool {
	if len(key) != delegationKeyLen {
		return false
	}
	b, err := b64.Decode(key)
	return err == nil && len(b) == 32 && b64.Encode(b) == key
}

// delegationKeyLen is the length of base64url (unpadded) of 32 bytes.
const delegationKeyLen = 43

// Signers returns the principal ID that must have signed each block:
// the issuer for the authority, the attenuator for each attenuation.
func (tok *Token) Signers() []string {
	ids := make([]string, 0, tok.Blocks())
	ids = append(ids, tok.t.Authority.Issuer)
	for i := range tok.t.Attenuations {
		ids = append(ids, tok.t.Attenuations[i].Attenuator)
	}
	return ids
}

// Delegatee is the current holder: the last block's delegatee.
func (tok *Token) Delegatee() string {
	if n := len(tok.t.Attenuations); n > 0 {
		return tok.t.Attenuations[n-1].Delegatee
	}
	return tok.t.Authority.Delegatee
}

// Prefix returns the token made of the first n blocks: the authority and
// n−1 attenuations, with their signatures. Every block is signed on its
// own, so the prefix of a token a Verifier accepted is the (verified)
// token of the ancestor delegation at depth n−1.
func (tok *Token) Prefix(n int) (*Token, error) {
	if n < 1 || n > tok.Blocks() {
		return nil, fmt.Errorf("prefix of %d blocks: the token has %d", n, tok.Blocks())
	}
	if n == tok.Blocks() {
		return tok, nil
	}
	t := tok.Unverified()
	if len(t.Signatures) < n {
		// A parsed token has not been verified: it may lack signatures.
		return nil, fmt.Errorf("prefix of %d blocks: the token has only %d signatures", n, len(t.Signatures))
	}
	t.Attenuations = t.Attenuations[:n-1]
	t.Signatures = t.Signatures[:n]
	return reparse(&t)
}
