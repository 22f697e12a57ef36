package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/delegateos/delegateos/internal/b64"
)

// PrincipalIDLen is the length of a principal ID: 32 bytes in unpadded base64url.
const PrincipalIDLen = 43

// ErrInvalidPrincipal is wrapped by every error about a malformed principal ID or DID.
var ErrInvalidPrincipal = errors.New("invalid principal")

// Keypair is a principal's Ed25519 key pair.
type Keypair struct {
	name string
	priv ed25519.PrivateKey
	id   string
}

// FromSeed derives the keypair of a 32-byte Ed25519 seed.
func FromSeed(seed []byte, name string) (*Keypair, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("seed is %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return &Keypair{name: name, priv: priv, id: PrincipalID(priv.Public().(ed25519.PublicKey))}, nil
}

// Generate creates a keypair from a fresh seed read from r (crypto/rand.Reader when nil).
func Generate(r io.Reader, name string) (*Keypair, error) {
	if r == nil {
		r = rand.Reader
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(r, seed); err != nil {
		return nil, fmt.Errorf("read seed: %w", err)
	}
	return FromSeed(seed, name)
}

// ID is the principal ID.
func (k *Keypair) ID() string { return k.id }

// DID is the principal's did:key.
func (k *Keypair) DID() string { return DIDFromPublicKey(k.Public()) }

// Name is the optional human name given at creation.
func (k *Keypair) Name() string { return k.name }

// Public is the Ed25519 public key.
func (k *Keypair) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// PrivateKey is the Ed25519 private key, for the signing helpers.
func (k *Keypair) PrivateKey() ed25519.PrivateKey { return k.priv }

// Seed is the 32-byte seed the key was derived from.
func (k *Keypair) Seed() []byte { return k.priv.Seed() }

// PrincipalID returns the principal ID of a public key.
func PrincipalID(pub ed25519.PublicKey) string { return b64.Encode(pub) }

// PublicKey decodes a base64url principal ID. It does not accept did:key;
// use ParsePrincipal for user input. A key of small order is refused
// (ErrSmallOrder).
func PublicKey(id string) (ed25519.PublicKey, error) {
	if len(id) != PrincipalIDLen {
		return nil, fmt.Errorf("%w: principal ID %q is %d characters, want %d", ErrInvalidPrincipal, clip(id), len(id), PrincipalIDLen)
	}
	b, err := b64.Decode(id)
	if err != nil {
		return nil, fmt.Errorf("%w: principal ID %q is not unpadded base64url", ErrInvalidPrincipal, clip(id))
	}
	if SmallOrder(b) {
		return nil, fmt.Errorf("%w: principal ID %q is a %w, under which signatures can be made without a private key", ErrInvalidPrincipal, clip(id), ErrSmallOrder)
	}
	return ed25519.PublicKey(b), nil
}

// ParsePrincipal accepts a principal ID or a did:key and returns the public key.
func ParsePrincipal(s string) (ed25519.PublicKey, error) {
	if strings.HasPrefix(s, "did:") {
		return PublicKeyFromDID(s)
	}
	return PublicKey(s)
}

// NormalizePrincipal accepts a principal ID or a did:key and returns the principal ID.
func NormalizePrincipal(s string) (string, error) {
	pub, err := ParsePrincipal(s)
	if err != nil {
		return "", err
	}
	return PrincipalID(pub), nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
