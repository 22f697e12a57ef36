package sig

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/b64"
)

// BLAKE2b-256 (unkeyed, 32-byte output) known answers, as published in the
// BLAKE2 test vectors and reproduced by many implementations.
func TestDigestKnownAnswers(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"},
		{"abc", "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"},
	}
	for _, tt := range tests {
		d := Digest([]byte(tt.in))
		if got := hex.EncodeToString(d[:]); got != tt.want {
			t.Errorf("Digest(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// RFC 8032 §7.1 TEST 1 key pair.
func testKey(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	seed, _ := hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	if hex.EncodeToString(pub) != "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a" {
		t.Fatalf("RFC 8032 TEST 1 public key mismatch: %x", pub)
	}
	return pub, priv
}

type payload struct {
	B string `json:"b"`
	A int    `json:"a"`
}

func TestSignVerifyRoundTrip(t *testing.T) {
	pub, priv := testKey(t)
	v := payload{B: "x<y", A: 7}
	s, err := Sign(priv, v)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(raw) != ed25519.SignatureSize {
		t.Fatalf("signature %q is not 64 bytes of unpadded base64url (%v)", s, err)
	}
	if err := Verify(pub, v, s); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	// The signature covers the canonical form, so any value with the same
	// canonical JSON verifies.
	same := map[string]any{"a": 7, "b": "x<y"}
	if err := Verify(pub, same, s); err != nil {
		t.Fatalf("Verify of an equal map: %v", err)
	}
	// Ed25519 is deterministic.
	if s2, _ := Sign(priv, v); s2 != s {
		t.Fatalf("second signature differs: %q vs %q", s2, s)
	}
}

// The scheme is Ed25519 over BLAKE2b-256 of the canonical bytes (§3.3),
// not over the bytes themselves: check it with the standard library alone.
func TestSignCanonicalSignsDigest(t *testing.T) {
	pub, priv := testKey(t)
	canonical := []byte(`{"a":7,"b":"x<y"}`)
	s := SignCanonical(priv, canonical)
	raw, err := b64.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	d := Digest(canonical)
	if !ed25519.Verify(pub, d[:], raw) {
		t.Fatal("signature is not an Ed25519 signature of BLAKE2b-256(canonical)")
	}
	if ed25519.Verify(pub, canonical, raw) {
		t.Fatal("signature verifies over the raw bytes; want over the digest")
	}
	if err := VerifyCanonical(pub, canonical, s); err != nil {
		t.Fatalf("VerifyCanonical: %v", err)
	}
	if got, _ := Sign(priv, payload{B: "x<y", A: 7}); got != s {
		t.Fatalf("Sign and SignCanonical disagree: %q vs %q", got, s)
	}
}

func TestVerifyRejects(t *testing.T) {
	pub, priv := testKey(t)
	otherPub, _, _ := ed25519.GenerateKey(bytes.NewReader(make([]byte, 32)))
	canonical := []byte(`{"a":7,"b":"x<y"}`)
	good := SignCanonical(priv, canonical)
	raw, _ := b64.Decode(good)

	flip := func(b []byte, bit int) []byte {
		c := bytes.Clone(b)
		c[bit/8] ^= 1 << (bit % 8)
		return c
	}

	tests := []struct {
		name      string
		pub       ed25519.PublicKey
		canonical []byte
		sig       string
		badSig    bool // want ErrBadSignature (rather than a decoding error)
	}{
		{"wrong key", otherPub, canonical, good, true},
		{"flipped message bit", pub, flip(canonical, 3), good, true},
		{"extra message byte", pub, append(bytes.Clone(canonical), ' '), good, true},
		{"flipped first signature bit", pub, canonical, b64.Encode(flip(raw, 0)), true},
		{"flipped last signature bit", pub, canonical, b64.Encode(flip(raw, 511)), true},
		{"flipped R bit", pub, canonical, b64.Encode(flip(raw, 100)), true},
		{"flipped S bit", pub, canonical, b64.Encode(flip(raw, 300)), true},
		{"zero signature", pub, canonical, b64.Encode(make([]byte, 64)), true},
		{"flipped key bit", ed25519.PublicKey(flip(pub, 17)), canonical, good, true},
		{"nil key", nil, canonical, good, true},
		{"short key", pub[:31], canonical, good, true},
		{"long key", append(bytes.Clone(pub), 0), canonical, good, true},
		{"private key as public key", ed25519.PublicKey(priv), canonical, good, true},
		{"empty signature", pub, canonical, "", false},
		{"short signature", pub, canonical, b64.Encode(raw[:63]), false},
		{"long signature", pub, canonical, b64.Encode(append(bytes.Clone(raw), 0)), false},
		{"padded signature", pub, canonical, good + "==", false},
		{"standard alphabet", pub, canonical, base64.RawStdEncoding.EncodeToString(raw), false},
		{"signature with line break", pub, canonical, good[:40] + "\n" + good[40:], false},
		{"hex signature", pub, canonical, hex.EncodeToString(raw), false},
	}
	if !strings.ContainsAny(base64.RawStdEncoding.EncodeToString(raw), "+/") {
		t.Fatal("test signature has no '+' or '/': the standard-alphabet case proves nothing")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyCanonical(tt.pub, tt.canonical, tt.sig)
			if err == nil {
				t.Fatal("verified, want an error")
			}
			if tt.badSig && !errors.Is(err, ErrBadSignature) {
				t.Fatalf("err = %v, want ErrBadSignature", err)
			}
		})
	}
}

func TestVerifyDigestLengths(t *testing.T) {
	pub, priv := testKey(t)
	d := Digest([]byte("x"))
	good := ed25519.Sign(priv, d[:])
	if err := VerifyDigest(pub, d, good); err != nil {
		t.Fatalf("VerifyDigest: %v", err)
	}
	for _, n := range []int{0, 1, 31, 33, 64} {
		if err := VerifyDigest(make(ed25519.PublicKey, n), d, good); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%d-byte key: err = %v, want ErrBadSignature", n, err)
		}
	}
	for _, n := range []int{0, 1, 63, 65, 128} {
		if err := VerifyDigest(pub, d, make([]byte, n)); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%d-byte signature: err = %v, want ErrBadSignature", n, err)
		}
	}
}

func TestDecodeSignature(t *testing.T) {
	raw := bytes.Repeat([]byte{0xfb}, 64)
	got, err := DecodeSignature(b64.Encode(raw))
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("DecodeSignature = %x, %v", got, err)
	}
	for _, s := range []string{"", b64.Encode(raw[:63]), b64.Encode(append(raw, 0)), base64.URLEncoding.EncodeToString(raw), base64.RawStdEncoding.EncodeToString(raw)} {
		if got, err := DecodeSignature(s); err == nil {
			t.Errorf("DecodeSignature(%q) = %x, want an error", s, got)
		}
	}
}

func TestSignVerifyUnencodable(t *testing.T) {
	pub, priv := testKey(t)
	if _, err := Sign(priv, make(chan int)); err == nil {
		t.Error("Sign(chan) succeeded")
	}
	if err := Verify(pub, func() {}, b64.Encode(make([]byte, 64))); err == nil {
		t.Error("Verify(func) succeeded")
	}
}

// Every refusal, including a signature that cannot be decoded, is
// ErrBadSignature for callers that test with errors.Is.
func TestVerifyCanonicalMalformedIsErrBadSignature(t *testing.T) {
	k := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	for _, s := range []string{"", "!!", "AAAA", strings.Repeat("A", 86) + "=="} {
		if err := VerifyCanonical(k.Public().(ed25519.PublicKey), []byte(`{}`), s); !errors.Is(err, ErrBadSignature) {
			t.Errorf("signature %q: got %v, want ErrBadSignature", s, err)
		}
	}
}
