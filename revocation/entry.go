package revocation

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// Scope is what the revoker meant an entry to revoke (§4.1). It is signed
// and kept, but an honoured entry revokes every token containing the
// revoked block whatever its scope (§10.1 step 2); see the package
// documentation.
type Scope string

const (
	// ScopeBlock is the scope of an entry made for the revoked block (the
	// reference implementation's default).
	ScopeBlock Scope = "block"
	// ScopeChain is the scope of an entry made for the revoked block and
	// every token attenuated from it (what delegateos revoke writes by
	// default).
	ScopeChain Scope = "chain"
)

// revocationIDLen is the length of a revocation ID: a 32-byte BLAKE2b-256
// digest in unpadded base64url.
const revocationIDLen = 43

var (
	// ErrMalformedEntry is wrapped by every error about an entry's structure.
	ErrMalformedEntry = errors.New("malformed revocation entry")
	// ErrInvalidSignature is wrapped when an entry's signature does not
	// verify against its revokedBy.
	ErrInvalidSignature = errors.New("revocation entry signature does not verify")
)

// Entry is a signed revocation (§4.1).
type Entry struct {
	// RevocationID is the revoked block's revocation ID (§3.5).
	RevocationID string `json:"revocationId"`
	// RevokedBy is the principal ID of the revoker, which signs the entry.
	RevokedBy string `json:"revokedBy"`
	// RevokedAt is when the revocation was made, as written by
	// timestamp.Format; any RFC 3339 time is accepted on reading.
	RevokedAt string `json:"revokedAt"`
	Scope     Scope  `json:"scope"`
	// Signature is the revoker's base64url Ed25519 signature over
	// canonicalize({revocationId, revokedBy, revokedAt, scope}).
	Signature string `json:"signature"`
}

// NewEntry signs a revocation of the block with the given revocation ID,
// made by k at the given time (zero means now).
func NewEntry(k *identity.Keypair, revocationID string, scope Scope, at time.Time) (Entry, error) {
	if k == nil {
		return Entry{}, errors.New("no revoker key")
	}
	if at.IsZero() {
		at = time.Now()
	}
	e := Entry{
		RevocationID: revocationID,
		RevokedBy:    k.ID(),
		RevokedAt:    timestamp.Format(at),
		Scope:        scope,
	}
	if _, err := e.checkStructure(); err != nil {
		return Entry{}, err
	}
	e.Signature = sig.SignCanonical(k.PrivateKey(), e.signedPayload())
	return e, nil
}

// Verify checks the entry's structure and its signature against RevokedBy.
func (e Entry) Verify() error {
	pub, err := e.checkStructure()
	if err != nil {
		return err
	}
	raw, err := sig.DecodeSignature(e.Signature)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedEntry, err)
	}
	if sig.VerifyDigest(pub, sig.Digest(e.signedPayload()), raw) != nil {
		return fmt.Errorf("%w (revocationId %s, revokedBy %s)", ErrInvalidSignature, e.RevocationID, e.RevokedBy)
	}
	return nil
}

// checkStructure checks every field but the signature and returns the
// revoker's public key.
func (e Entry) checkStructure() (ed25519.PublicKey, error) {
	if err := checkRevocationID(e.RevocationID); err != nil {
		return nil, err
	}
	pub, err := identity.PublicKey(e.RevokedBy)
	if err != nil {
		return nil, fmt.Errorf("%w: revokedBy: %v", ErrMalformedEntry, err)
	}
	if len(e.RevokedAt) > maxRevokedAtLen {
		return nil, fmt.Errorf("%w: revokedAt is %d bytes, longer than any timestamp", ErrMalformedEntry, len(e.RevokedAt))
	}
	if _, err := timestamp.Parse(e.RevokedAt); err != nil {
		return nil, fmt.Errorf("%w: revokedAt: %v", ErrMalformedEntry, err)
	}
	if e.Scope != ScopeBlock && e.Scope != ScopeChain {
		return nil, fmt.Errorf("%w: scope %q is neither %q nor %q", ErrMalformedEntry, clip(string(e.Scope)), ScopeBlock, ScopeChain)
	}
	return pub, nil
}

// checkRevocationID reports whether id is a revocation ID: 32 bytes in
// unpadded base64url (43 characters).
func checkRevocationID(id string) error {
	if len(id) != revocationIDLen {
		return fmt.Errorf("%w: revocation ID %q is %d characters, want %d", ErrMalformedEntry, clip(id), len(id), revocationIDLen)
	}
	if _, err := b64.Decode(id); err != nil {
		return fmt.Errorf("%w: revocation ID %q is not unpadded base64url", ErrMalformedEntry, id)
	}
	return nil
}

// signedPayload is canonicalize({revocationId, revokedBy, revokedAt, scope}):
// members in RFC 8785 order ("revocationId" < "revokedAt" < "revokedBy" <
// "scope"). Tests hold it equal to canon.Marshal.
func (e Entry) signedPayload() []byte {
	b := make([]byte, 0, 96+len(e.RevocationID)+len(e.RevokedBy)+len(e.RevokedAt)+len(e.Scope))
	b = append(b, `{"revocationId":`...)
	b = canon.AppendString(b, e.RevocationID)
	b = append(b, `,"revokedAt":`...)
	b = canon.AppendString(b, e.RevokedAt)
	b = append(b, `,"revokedBy":`...)
	b = canon.AppendString(b, e.RevokedBy)
	b = append(b, `,"scope":`...)
	b = canon.AppendString(b, string(e.Scope))
	return append(b, '}')
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
