// Package sig is the protocol's one signing scheme: canonical JSON
// (RFC 8785) → BLAKE2b-256 → Ed25519 over the 32-byte digest, with keys and
// signatures written as unpadded base64url (DelegateOS §3.3, §7.2).
package sig

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"golang.org/x/crypto/blake2b"

	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
)

// ErrBadSignature is returned when a signature does not verify.
var ErrBadSignature = errors.New("signature does not verify")

// Digest is BLAKE2b-256 of b.
func Digest(b []byte) [32]byte { return blake2b.Sum256(b) }

// SignCanonical signs bytes that are already canonical JSON and returns the
// base64url signature.
func SignCanonical(priv ed25519.PrivateKey, canonical []byte) string {
	d := Digest(canonical)
	return b64.Encode(ed25519.Sign(priv, d[:]))
}

// Sign canonicalizes v and signs it.
func Sign(priv ed25519.PrivateKey, v any) (string, error) {
	c, err := canon.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("canonicalize: %w", err)
	}
	return SignCanonical(priv, c), nil
}

// DecodeSignature decodes a base64url Ed25519 signature and checks its length.
func DecodeSignature(s string) ([]byte, error) {
	b, err := b64.Decode(s)
	if err != nil {
		return nil, fmt.Errorf("signature is not base64url: %w", err)
	}
	if len(b) != ed25519.SignatureSize {
		return nil, fmt.Errorf("signature is %d bytes, want %d", len(b), ed25519.SignatureSize)
	}
	return b, nil
}

// VerifyDigest checks a raw signature over a digest. Lengths are checked
// first because ed25519.Verify panics on a public key of the wrong size.
func VerifyDigest(pub ed25519.PublicKey, digest [32]byte, signature []byte) error {
	if len(pub) != ed25519.PublicKeySize || len(signature) != ed25519.SignatureSize {
		return ErrBadSignature
	}
	if !ed25519.Verify(pub, digest[:], signature) {
		return ErrBadSignature
	}
	return nil
}

// VerifyCanonical checks a base64url signature over canonical bytes.
func VerifyCanonical(pub ed25519.PublicKey, canonical []byte, signature string) error {
	raw, err := DecodeSignature(signature)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	return VerifyDigest(pub, Digest(canonical), raw)
}

// Verify canonicalizes v and checks a base64url signature over it.
func Verify(pub ed25519.PublicKey, v any, signature string) error {
	c, err := canon.Marshal(v)
	if err != nil {
		return fmt.Errorf("canonicalize: %w", err)
	}
	return VerifyCanonical(pub, c, signature)
}
