package identity

import (
	"crypto/ed25519"
	"fmt"
	"strings"
)

// DIDPrefix starts every did:key; the multibase prefix 'z' marks base58btc.
const DIDPrefix = "did:key:z"

// ed25519Multicodec is the unsigned-varint multicodec code 0xed for
// ed25519-pub, as it prefixes the key inside a did:key.
var ed25519Multicodec = [2]byte{0xed, 0x01}

// maxDIDLen bounds did:key input before base58 decoding (quadratic in length).
const maxDIDLen = 128

// DIDFromPublicKey returns the did:key of an Ed25519 public key.
func DIDFromPublicKey(pub ed25519.PublicKey) string {
	buf := make([]byte, 0, 2+len(pub))
	buf = append(buf, ed25519Multicodec[:]...)
	buf = append(buf, pub...)
	return DIDPrefix + Base58Encode(buf)
}

// PublicKeyFromDID decodes an Ed25519 did:key. A key of small order is
// refused (ErrSmallOrder).
func PublicKeyFromDID(did string) (ed25519.PublicKey, error) {
	if len(did) > maxDIDLen {
		return nil, fmt.Errorf("%w: did:key is %d characters, longer than any Ed25519 did:key", ErrInvalidPrincipal, len(did))
	}
	rest, ok := strings.CutPrefix(did, DIDPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a base58btc did:key (want prefix %q)", ErrInvalidPrincipal, clip(did), DIDPrefix)
	}
	raw, err := base58Decode(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalidPrincipal, clip(did), err)
	}
	if len(raw) != 2+ed25519.PublicKeySize || raw[0] != ed25519Multicodec[0] || raw[1] != ed25519Multicodec[1] {
		return nil, fmt.Errorf("%w: %q is not an Ed25519 did:key (multicodec 0xed01 + 32 bytes)", ErrInvalidPrincipal, clip(did))
	}
	if SmallOrder(raw[2:]) {
		return nil, fmt.Errorf("%w: %q is a %w, under which signatures can be made without a private key", ErrInvalidPrincipal, clip(did), ErrSmallOrder)
	}
	return ed25519.PublicKey(raw[2:]), nil
}

// DIDFromPrincipalID converts a principal ID to its did:key.
func DIDFromPrincipalID(id string) (string, error) {
	pub, err := PublicKey(id)
	if err != nil {
		return "", err
	}
	return DIDFromPublicKey(pub), nil
}

// PrincipalIDFromDID converts a did:key to its principal ID.
func PrincipalIDFromDID(did string) (string, error) {
	pub, err := PublicKeyFromDID(did)
	if err != nil {
		return "", err
	}
	return PrincipalID(pub), nil
}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

var base58Index = func() (idx [256]int8) {
	for i := range idx {
		idx[i] = -1
	}
	for i := 0; i < len(base58Alphabet); i++ {
		idx[base58Alphabet[i]] = int8(i)
	}
	return idx
}()

func base58Decode(s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("empty base58")
	}
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	var bytes []byte // little-endian
	for i := zeros; i < len(s); i++ {
		d := base58Index[s[i]]
		if d < 0 {
			return nil, fmt.Errorf("invalid base58 character %q", s[i])
		}
		carry := int(d)
		for j := range bytes {
			carry += int(bytes[j]) * 58
			bytes[j] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			bytes = append(bytes, byte(carry))
			carry >>= 8
		}
	}
	out := make([]byte, zeros+len(bytes))
	for i, c := range bytes {
		out[len(out)-1-i] = c
	}
	return out, nil
}
