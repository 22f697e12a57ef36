package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// didKeyVectors are published Ed25519 did:keys with the key they encode.
var didKeyVectors = []struct {
	source string
	seed   string // hex Ed25519 seed, where published
	pub    string // hex public key
	b58    string // publicKeyBase58, where published
	id     string // base64url public key, where published
	did    string
}{
	// W3C CCG did:key spec, test-vectors/ed25519-x25519.json
	// (github.com/w3c-ccg/did-method-key).
	{
		source: "W3C CCG ed25519-x25519.json, seed 0",
		seed:   "0000000000000000000000000000000000000000000000000000000000000000",
		pub:    "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29",
		b58:    "4zvwRjXUKGfvwnParsHAS3HuSVzV5cA4McphgmoCtajS",
		did:    "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp",
	},
	{
		source: "W3C CCG ed25519-x25519.json, seed 1",
		seed:   "0000000000000000000000000000000000000000000000000000000000000001",
		pub:    "4cb5abf6ad79fbf5abbccafcc269d85cd2651ed4b885b5869f241aedf0a5ba29",
		b58:    "6ASf5EcmmEHTgDJ4X4ZT5vT6iHVJBXPg5AN5YoTCpGWt",
		did:    "did:key:z6MkjchhfUsD6mmvni8mCdXHw216Xrm9bQe2mBH1P5RDjVJG",
	},
	{
		source: "W3C CCG ed25519-x25519.json, seed 2",
		seed:   "0000000000000000000000000000000000000000000000000000000000000002",
		pub:    "7422b9887598068e32c4448a949adb290d0f4e35b9e01b0ee5f1a1e600fe2674",
		b58:    "8pM1DN3RiT8vbom5u1sNryaNT1nyL8CTTW3b5PwWXRBH",
		did:    "did:key:z6MknGc3ocHs3zdPiJbnaaqDi58NGb4pk1Sp9WxWufuXSdxf",
	},
	{
		source: "W3C CCG ed25519-x25519.json, seed 3",
		seed:   "0000000000000000000000000000000000000000000000000000000000000003",
		pub:    "f381626e41e7027ea431bfe3009e94bdd25a746beec468948d6c3c7c5dc9a54b",
		b58:    "HPYVwAQmskwT1qEEeRzhoomyfyupJGASQQtCXSNG8XS2",
		did:    "did:key:z6MkvqoYXQfDDJRv8L4wKzxYeuKyVZBfi9Qo6Ro8MiLH3kDQ",
	},
	{
		source: "W3C CCG ed25519-x25519.json, seed 4",
		seed:   "0000000000000000000000000000000000000000000000000000000000000004",
		pub:    "fd50b8e3b144ea244fbf7737f550bc8dd0c2650bbc1aada833ca17ff8dbf329b",
		b58:    "J3qYF7YJMKCqQke47UQwiHizgFUXapHxRxKmxbkar89x",
		did:    "did:key:z6MkwW6aqMnjgrhJXFUko3NnZPGzVpkNzhYK7yEhnsibmLwL",
	},
	// RFC 8032 §7.1 key pairs. Their did:keys are widely published and were
	// checked against an independent base58 decoder; the principal ID of
	// TEST 1 is the "x" of the RFC 8037 Appendix A.1 JWK.
	{
		source: "RFC 8032 TEST 1",
		seed:   "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
		pub:    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
		id:     "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
		did:    "did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw",
	},
	{
		source: "RFC 8032 TEST 2",
		seed:   "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
		pub:    "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
		did:    "did:key:z6MkiaMbhXHNA4eJVCCj8dbzKzTgYDKf6crKgHVHid1F1WCT",
	},
	{
		source: "RFC 8032 TEST 3",
		seed:   "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
		pub:    "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
		did:    "did:key:z6MkwSD8dBdqcXQzKJZQFPy2hh2izzxskndKCjdmC2dBpfME",
	},
	// Hyperledger ACA-Py did:key tests (aries_cloudagent/did/tests/test_dids.py).
	{
		source: "ACA-Py test_dids.py",
		pub:    "6c2d48b1605684ef94363dc6158eeb6577466e1a36a740f2fc624617edb7712e",
		b58:    "8HH5gYEeNc3z7PYXmd54d4x6qAfCNrqQqEB3nS7Zfu7K",
		did:    "did:key:z6MkmjY8GnV5i9YTDtPETC2uUAW6ejw3nk5mXF5yci5ab7th",
	},
}

func TestDIDKeyVectors(t *testing.T) {
	for _, v := range didKeyVectors {
		t.Run(v.source, func(t *testing.T) {
			pub := ed25519.PublicKey(mustHex(t, v.pub))
			id := base64.RawURLEncoding.EncodeToString(pub)
			if v.id != "" && v.id != id {
				t.Fatalf("vector's principal ID %q != base64url of its key %q", v.id, id)
			}
			if v.seed != "" {
				k, err := FromSeed(mustHex(t, v.seed), "")
				if err != nil {
					t.Fatal(err)
				}
				if !k.Public().Equal(pub) {
					t.Fatalf("FromSeed public key = %x, want %s", k.Public(), v.pub)
				}
				if k.DID() != v.did || k.ID() != id {
					t.Fatalf("FromSeed: DID %q ID %q, want %q %q", k.DID(), k.ID(), v.did, id)
				}
			}
			if v.b58 != "" {
				if got := Base58Encode(pub); got != v.b58 {
					t.Errorf("Base58Encode(pub) = %q, want publicKeyBase58 %q", got, v.b58)
				}
			}
			if got := DIDFromPublicKey(pub); got != v.did {
				t.Errorf("DIDFromPublicKey = %q, want %q", got, v.did)
			}
			if got, err := PublicKeyFromDID(v.did); err != nil || !got.Equal(pub) {
				t.Errorf("PublicKeyFromDID = %x, %v; want %s", got, err, v.pub)
			}
			if got, err := DIDFromPrincipalID(id); err != nil || got != v.did {
				t.Errorf("DIDFromPrincipalID(%q) = %q, %v; want %q", id, got, err, v.did)
			}
			if got, err := PrincipalIDFromDID(v.did); err != nil || got != id {
				t.Errorf("PrincipalIDFromDID = %q, %v; want %q", got, err, id)
			}
			if got, err := NormalizePrincipal(v.did); err != nil || got != id {
				t.Errorf("NormalizePrincipal(did) = %q, %v; want %q", got, err, id)
			}
		})
	}
}

// refBase58 is base58btc by big-integer arithmetic, to check base58Encode
// and base58Decode against something that shares no code with them.
func refBase58(b []byte) string {
	var out []byte
	n := new(big.Int).SetBytes(b)
	mod := new(big.Int)
	for n.Sign() > 0 {
		n.DivMod(n, big.NewInt(58), mod)
		out = append(out, base58Alphabet[mod.Int64()])
	}
	for _, c := range b {
		if c != 0 {
			break
		}
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

func TestDIDRoundTrip(t *testing.T) {
	r := &countingReader{n: 99}
	for range 200 {
		k, err := Generate(r, "")
		if err != nil {
			t.Fatal(err)
		}
		did := k.DID()
		if want := "did:key:z" + refBase58(append([]byte{0xed, 0x01}, k.Public()...)); did != want {
			t.Fatalf("DID() = %q, want %q", did, want)
		}
		if !strings.HasPrefix(did, "did:key:z6Mk") {
			t.Fatalf("Ed25519 did:key %q does not start z6Mk", did)
		}
		id, err := PrincipalIDFromDID(did)
		if err != nil || id != k.ID() {
			t.Fatalf("PrincipalIDFromDID(%q) = %q, %v; want %q", did, id, err, k.ID())
		}
		back, err := DIDFromPrincipalID(id)
		if err != nil || back != did {
			t.Fatalf("DIDFromPrincipalID(%q) = %q, %v; want %q", id, back, err, did)
		}
	}
}

func TestPublicKeyFromDIDRefuses(t *testing.T) {
	pub := mustHex(t, "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
	good := "did:key:z" + refBase58(append([]byte{0xed, 0x01}, pub...))
	mb := func(b ...[]byte) string { return "did:key:z" + refBase58(bytes.Join(b, nil)) }
	withChar := func(c string) string { return good[:20] + c + good[21:] }
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"no key", "did:key:z"},
		{"no multibase", "did:key:"},
		{"no method", "did:"},
		{"other method", "did:web:example.com"},
		{"upper-case scheme", "DID:key:" + good[len("did:key:"):]},
		{"upper-case method", "did:KEY:" + good[len("did:key:"):]},
		{"no multibase prefix", "did:key:" + good[len("did:key:z"):]},
		{"upper-case multibase prefix", "did:key:Z" + good[len("did:key:z"):]},
		{"base64url multibase", "did:key:u" + base64.RawURLEncoding.EncodeToString(append([]byte{0xed, 0x01}, pub...))},
		{"base58 without did:key", "z" + good[len("did:key:z"):]},
		{"X25519 key (CCG vector)", "did:key:z6LShs9GGnqk85isEBzzshkuVWrVKsRp24GnDuHk8QWkARMW"},
		{"secp256k1 multicodec", mb([]byte{0xe7, 0x01}, append([]byte{0x02}, pub...))},
		{"multicodec 0xed00", mb([]byte{0xed, 0x00}, pub)},
		{"multicodec bytes swapped", mb([]byte{0x01, 0xed}, pub)},
		{"multicodec without varint continuation", mb([]byte{0xed}, pub, []byte{0})},
		{"raw key, no multicodec", mb(pub, []byte{0, 0})},
		{"key 31 bytes", mb([]byte{0xed, 0x01}, pub[:31])},
		{"key 33 bytes", mb([]byte{0xed, 0x01}, pub, []byte{0})},
		{"key 64 bytes", mb([]byte{0xed, 0x01}, pub, pub)},
		{"key 0 bytes", mb([]byte{0xed, 0x01})},
		{"leading zero byte", "did:key:z1" + good[len("did:key:z"):]},
		{"invalid base58 0", withChar("0")},
		{"invalid base58 O", withChar("O")},
		{"invalid base58 I", withChar("I")},
		{"invalid base58 l", withChar("l")},
		{"invalid base58 +", withChar("+")},
		{"invalid base58 _", withChar("_")},
		{"invalid base58 NUL", withChar("\x00")},
		{"invalid base58 non-ASCII", withChar("é")},
		{"fragment", good + "#" + good[len("did:key:"):]},
		{"query", good + "?x=1"},
		{"trailing space", good + " "},
		{"trailing line break", good + "\n"},
		{"leading space", " " + good},
		{"overlong", good + strings.Repeat("1", maxDIDLen)},
		{"overlong zeros", "did:key:z" + strings.Repeat("1", 100_000)},
		{"overlong digits", "did:key:z" + strings.Repeat("z", 100_000)},
		{"one over the limit", "did:key:z" + strings.Repeat("2", maxDIDLen-len("did:key:z")+1)},
		{"truncated", good[:len(good)-1]},
		{"extended", good + "2"},
	}
	if _, err := PublicKeyFromDID(good); err != nil {
		t.Fatalf("control %q: %v", good, err)
	}
	if pub, err := PublicKeyFromDID("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"); !errors.Is(err, ErrInvalidPrincipal) {
		t.Fatalf("PublicKeyFromDID(principal ID) = %x, %v; want ErrInvalidPrincipal", pub, err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if pub, err := PublicKeyFromDID(tt.in); !errors.Is(err, ErrInvalidPrincipal) {
				t.Fatalf("PublicKeyFromDID(%q) = %x, %v; want ErrInvalidPrincipal", clip(tt.in), pub, err)
			}
			if id, err := PrincipalIDFromDID(tt.in); !errors.Is(err, ErrInvalidPrincipal) {
				t.Fatalf("PrincipalIDFromDID(%q) = %q, %v; want ErrInvalidPrincipal", clip(tt.in), id, err)
			}
			if pub, err := ParsePrincipal(tt.in); err == nil {
				t.Fatalf("ParsePrincipal(%q) = %x", clip(tt.in), pub)
			}
		})
	}
}

func TestDIDFromPrincipalIDRefuses(t *testing.T) {
	for _, in := range []string{"", "did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw", "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo=", "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo"} {
		if did, err := DIDFromPrincipalID(in); !errors.Is(err, ErrInvalidPrincipal) {
			t.Errorf("DIDFromPrincipalID(%q) = %q, %v; want ErrInvalidPrincipal", in, did, err)
		}
	}
}

// Bitcoin Core's base58_encode_decode.json vectors.
func TestBase58Vectors(t *testing.T) {
	tests := []struct{ hex, b58 string }{
		{"61", "2g"},
		{"626262", "a3gV"},
		{"636363", "aPEr"},
		{"73696d706c792061206c6f6e6720737472696e67", "2cFupjhnEsSn59qHXstmK2ffpLv2"},
		{"00eb15231dfceb60925886b67d065299925915aeb172c06647", "1NS17iag9jJgTHD1VXjvLCEnZuQ3rJDE9L"},
		{"516b6fcd0f", "ABnLTmg"},
		{"bf4f89001e670274dd", "3SEo3LWLoPntC"},
		{"572e4794", "3EFU7m"},
		{"ecac89cad93923c02321", "EJDM8drfXA6uyA"},
		{"10c8511e", "Rt5zm"},
		{"00000000000000000000", "1111111111"},
	}
	for _, tt := range tests {
		b := mustHex(t, tt.hex)
		if got := Base58Encode(b); got != tt.b58 {
			t.Errorf("Base58Encode(%s) = %q, want %q", tt.hex, got, tt.b58)
		}
		if got, err := base58Decode(tt.b58); err != nil || !bytes.Equal(got, b) {
			t.Errorf("base58Decode(%q) = %x, %v; want %s", tt.b58, got, err, tt.hex)
		}
	}
	if got := Base58Encode(nil); got != "" {
		t.Errorf("Base58Encode(nil) = %q", got)
	}
	if got, err := base58Decode(""); err == nil {
		t.Errorf("base58Decode(\"\") = %x, want an error (a did:key is never empty)", got)
	}
}

func TestBase58RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		n := r.IntN(48)
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		// Leading zero bytes are the special case of base58: make them common.
		for j := 0; j < n && j < i%5; j++ {
			b[j] = 0
		}
		s := Base58Encode(b)
		if want := refBase58(b); s != want {
			t.Fatalf("Base58Encode(%x) = %q, want %q", b, s, want)
		}
		if n == 0 {
			continue
		}
		back, err := base58Decode(s)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("base58Decode(Base58Encode(%x)) = %x, %v", b, back, err)
		}
	}
}

// FuzzPublicKeyFromDID: parsing never panics, and a did:key that parses is
// exactly the one its key encodes to (no second spelling of a key).
func FuzzPublicKeyFromDID(f *testing.F) {
	for _, v := range didKeyVectors {
		f.Add(v.did)
	}
	for _, s := range []string{"", "did:key:z", "did:key:z1", "did:key:z6LShs9GGnqk85isEBzzshkuVWrVKsRp24GnDuHk8QWkARMW",
		"did:key:z16MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw", "did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMs0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, did string) {
		pub, err := PublicKeyFromDID(did)
		if err != nil {
			if !errors.Is(err, ErrInvalidPrincipal) {
				t.Fatalf("error %v does not wrap ErrInvalidPrincipal", err)
			}
			return
		}
		if len(pub) != ed25519.PublicKeySize {
			t.Fatalf("PublicKeyFromDID(%q) returned %d bytes", did, len(pub))
		}
		if back := DIDFromPublicKey(pub); back != did {
			t.Fatalf("PublicKeyFromDID(%q) = %x, which encodes as %q", did, pub, back)
		}
		id, err := PrincipalIDFromDID(did)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := DIDFromPrincipalID(id); err != nil || back != did {
			t.Fatalf("did → %q → %q, %v", id, back, err)
		}
	})
}

// FuzzBase58Decode: every string base58Decode accepts has exactly one
// spelling, and agrees with the big-integer reference.
func FuzzBase58Decode(f *testing.F) {
	for _, s := range []string{"1", "11", "2g", "1NS17iag9jJgTHD1VXjvLCEnZuQ3rJDE9L", "z", "0", "111z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 256 {
			return
		}
		b, err := base58Decode(s)
		if err != nil {
			return
		}
		if back := Base58Encode(b); back != s {
			t.Fatalf("base58Decode(%q) = %x, which encodes as %q", s, b, back)
		}
		if ref := refBase58(b); ref != s {
			t.Fatalf("base58Decode(%q) = %x, but the reference encodes that as %q", s, b, ref)
		}
	})
}
