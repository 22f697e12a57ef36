package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// countingReader yields 0, 1, 2, ... so generated keys are reproducible.
type countingReader struct{ n byte }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.n
		r.n++
	}
	return len(p), nil
}

func TestFromSeedDeterministic(t *testing.T) {
	seed := bytes.Repeat([]byte{0x42}, ed25519.SeedSize)
	a, err := FromSeed(seed, "alice")
	if err != nil {
		t.Fatal(err)
	}
	b, err := FromSeed(bytes.Clone(seed), "other name")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() != b.ID() || a.DID() != b.DID() || !a.Public().Equal(b.Public()) || !a.PrivateKey().Equal(b.PrivateKey()) {
		t.Fatal("the same seed gave two different keys")
	}
	if !bytes.Equal(a.Seed(), seed) {
		t.Fatalf("Seed() = %x, want %x", a.Seed(), seed)
	}
	if a.Name() != "alice" || b.Name() != "other name" {
		t.Fatalf("names %q, %q", a.Name(), b.Name())
	}
	want := ed25519.NewKeyFromSeed(seed)
	if !a.PrivateKey().Equal(want) {
		t.Fatal("FromSeed differs from ed25519.NewKeyFromSeed")
	}
	seed[0] ^= 1
	if !bytes.Equal(a.Seed(), b.Seed()) || a.Seed()[0] == seed[0] {
		t.Fatal("the keypair aliases the caller's seed slice")
	}
	c, _ := FromSeed(seed, "")
	if c.ID() == a.ID() {
		t.Fatal("different seeds gave the same principal")
	}
}

func TestFromSeedLength(t *testing.T) {
	for _, n := range []int{0, 1, 31, 33, 64} {
		if k, err := FromSeed(make([]byte, n), ""); err == nil {
			t.Errorf("FromSeed(%d bytes) = %s, want an error", n, k.ID())
		}
	}
}

func TestGenerate(t *testing.T) {
	a, err := Generate(&countingReader{}, "")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(&countingReader{}, "")
	if a.ID() != b.ID() {
		t.Fatal("Generate is not a function of the reader's bytes")
	}
	if want := mustHex(t, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"); !bytes.Equal(a.Seed(), want) {
		t.Fatalf("seed = %x, want the first 32 bytes read", a.Seed())
	}
	if _, err := Generate(bytes.NewReader(make([]byte, 31)), ""); err == nil {
		t.Fatal("Generate accepted a short read")
	}
	r1, _ := Generate(nil, "")
	r2, _ := Generate(nil, "")
	if r1 == nil || r2 == nil || r1.ID() == r2.ID() {
		t.Fatal("Generate(nil) does not use fresh randomness")
	}
}

var principalIDForm = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

func TestPrincipalIDForm(t *testing.T) {
	r := &countingReader{n: 7}
	for range 200 {
		k, err := Generate(r, "")
		if err != nil {
			t.Fatal(err)
		}
		id := k.ID()
		if len(id) != PrincipalIDLen || !principalIDForm.MatchString(id) {
			t.Fatalf("principal ID %q is not 43 unpadded base64url characters", id)
		}
		if want := base64.RawURLEncoding.EncodeToString(k.Public()); id != want {
			t.Fatalf("ID() = %q, want base64url(public key) %q", id, want)
		}
		if PrincipalID(k.Public()) != id {
			t.Fatal("PrincipalID(Public()) != ID()")
		}
		pub, err := PublicKey(id)
		if err != nil || !pub.Equal(k.Public()) {
			t.Fatalf("PublicKey(%q) = %x, %v", id, pub, err)
		}
	}
}

func TestPublicKeyRefuses(t *testing.T) {
	// RFC 8032 TEST 1 public key; its base64url form contains '_'.
	const id = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	if _, err := PublicKey(id); err != nil {
		t.Fatalf("PublicKey(%q): %v", id, err)
	}
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"one short", id[:42]},
		{"one long", id + "A"},
		{"padded", id + "="},
		{"padding in place of the last character", id[:42] + "="},
		{"standard alphabet", strings.ReplaceAll(id, "_", "/")},
		{"plus sign", "+" + id[1:]},
		{"non-canonical trailing bits", id[:42] + "p"},
		{"line break inside", id[:20] + "\n" + id[21:]},
		{"carriage return inside", id[:20] + "\r" + id[21:]},
		{"trailing line break", id[:42] + "\n"},
		{"line break, 42 characters of 31 bytes", id[:40] + "A\nA"},
		{"space", id[:42] + " "},
		{"did:key", "did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw"},
		{"hex", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"},
		{"non-ASCII", "é" + id[2:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub, err := PublicKey(tt.in)
			if err == nil {
				t.Fatalf("PublicKey(%q) = %x (%d bytes), want an error", tt.in, pub, len(pub))
			}
			if !errors.Is(err, ErrInvalidPrincipal) {
				t.Fatalf("err = %v, want ErrInvalidPrincipal", err)
			}
		})
	}
}

func TestParseAndNormalizePrincipal(t *testing.T) {
	const (
		id  = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
		did = "did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw"
		pub = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	)
	for _, in := range []string{id, did} {
		got, err := ParsePrincipal(in)
		if err != nil || hex.EncodeToString(got) != pub {
			t.Errorf("ParsePrincipal(%q) = %x, %v; want %s", in, got, err, pub)
		}
		n, err := NormalizePrincipal(in)
		if err != nil || n != id {
			t.Errorf("NormalizePrincipal(%q) = %q, %v; want %q", in, n, err, id)
		}
	}
	for _, in := range []string{"", "did:web:example.com", "did:key:", "did:", "DID:KEY:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw", id + "=", " " + id, did + " ", "alice"} {
		if _, err := ParsePrincipal(in); !errors.Is(err, ErrInvalidPrincipal) {
			t.Errorf("ParsePrincipal(%q): err = %v, want ErrInvalidPrincipal", in, err)
		}
		if n, err := NormalizePrincipal(in); !errors.Is(err, ErrInvalidPrincipal) {
			t.Errorf("NormalizePrincipal(%q) = %q, %v; want ErrInvalidPrincipal", in, n, err)
		}
	}
}

func TestErrorsClipInput(t *testing.T) {
	long := strings.Repeat("A", 10_000)
	for _, f := range []func(string) (ed25519.PublicKey, error){PublicKey, PublicKeyFromDID, ParsePrincipal} {
		_, err := f(long)
		if err == nil {
			t.Fatal("a 10 kB principal was accepted")
		}
		if len(err.Error()) > 300 {
			t.Errorf("error for a 10 kB input is %d bytes: the input is not clipped", len(err.Error()))
		}
	}
}
