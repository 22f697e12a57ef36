package dct

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
)

// stringPieces are the awkward parts random strings are made of: every
// character JSON escapes, characters other encoders escape, multi-byte and
// invalid UTF-8.
var stringPieces = []string{
	"a", "Z", "0", " ", "/", "*", "**", "~",
	"\"", "\\", "\x00", "\x01", "\b", "\t", "\n", "\v", "\f", "\r", "\x1b", "\x1f", "\x7f",
	"<", ">", "&", "'",
	"é", "\u00a0", "\u2028", "\u2029", "\ufeff", "\ufffd", "中", "😀", "\U0010ffff",
	"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\x80",
	"\\u0000", "\\ud800",
}

func randString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(stringPieces[r.IntN(len(stringPieces))])
	}
	return b.String()
}

func randInt(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return 0
	case 1:
		return canon.MaxSafeInteger
	case 2:
		return -canon.MaxSafeInteger
	case 3:
		return int64(r.IntN(100))
	case 4:
		return -int64(r.IntN(100))
	}
	return r.Int64N(canon.MaxSafeInteger)
}

func randCaps(r *rand.Rand) []Capability {
	caps := make([]Capability, r.IntN(4))
	for i := range caps {
		caps[i] = Capability{Namespace: randString(r), Action: randString(r), Resource: randString(r)}
	}
	return caps
}

// randToken is a random token of the package's types. Slices are never
// nil: the encoder writes nil as [] (see TestEncodeNilSlices).
func randToken(r *rand.Rand) SignedToken {
	t := SignedToken{
		Format: randString(r),
		Authority: Authority{
			Issuer: randString(r), Delegatee: randString(r), Capabilities: randCaps(r),
			ContractID: randString(r), DelegationID: randString(r), ParentDelegationID: randString(r),
			ChainDepth: randInt(r), MaxChainDepth: randInt(r), MaxBudgetMicrocents: randInt(r),
			ExpiresAt: randString(r), IssuedAt: randString(r),
		},
		Attenuations: make([]Attenuation, r.IntN(4)),
		Signatures:   make([]Signature, r.IntN(4)),
	}
	for i := range t.Attenuations {
		a := Attenuation{Attenuator: randString(r), Delegatee: randString(r), DelegationID: randString(r), ContractID: randString(r)}
		if r.IntN(2) == 0 {
			caps := randCaps(r)
			a.AllowedCapabilities = &caps
		}
		if r.IntN(2) == 0 {
			a.MaxBudgetMicrocents = ptr(randInt(r))
		}
		if r.IntN(2) == 0 {
			a.ExpiresAt = ptr(randString(r))
		}
		if r.IntN(2) == 0 {
			a.MaxChainDepth = ptr(randInt(r))
		}
		t.Attenuations[i] = a
	}
	for i := range t.Signatures {
		t.Signatures[i] = Signature{Signer: randString(r), Signature: randString(r), Covers: Covers(r.IntN(MaxAttenuations+2) - 1)}
	}
	return t
}

// checkEncoding holds the typed encoder, its block spans and the signed
// payloads equal to the generic canonicalizer.
func checkEncoding(t *testing.T, st *SignedToken) {
	t.Helper()
	want, err := canon.Marshal(st)
	if err != nil {
		t.Fatalf("canon.Marshal: %v", err)
	}
	e := encodeToken(st)
	if !bytes.Equal(e.all, want) {
		t.Fatalf("encoder differs from canon.Marshal:\n got %q\nwant %q", e.all, want)
	}
	wantAuth, _ := canon.Marshal(st.Authority)
	if got := e.authority.of(e.all); !bytes.Equal(got, wantAuth) {
		t.Fatalf("authority span %q, want %q", got, wantAuth)
	}
	wantPayload0, _ := canon.Marshal(map[string]any{"authority": st.Authority})
	if got := authorityPayload(e.authority.of(e.all)); !bytes.Equal(got, wantPayload0) {
		t.Fatalf("authority payload %q, want %q", got, wantPayload0)
	}
	if len(e.attenuation) != len(st.Attenuations) {
		t.Fatalf("%d attenuation spans for %d attenuations", len(e.attenuation), len(st.Attenuations))
	}
	for i := range st.Attenuations {
		wantAtt, _ := canon.Marshal(st.Attenuations[i])
		if got := e.attenuation[i].of(e.all); !bytes.Equal(got, wantAtt) {
			t.Fatalf("attenuation %d span %q, want %q", i, got, wantAtt)
		}
		wantPayload, _ := canon.Marshal(map[string]any{"authority": st.Authority, "attenuations": st.Attenuations[:i+1]})
		if got := attenuationPayload(&e, i); !bytes.Equal(got, wantPayload) {
			t.Fatalf("attenuation %d payload %q, want %q", i, got, wantPayload)
		}
		if got := attenuationDigests(&e)[i]; got != sig.Digest(wantPayload) {
			t.Fatalf("attenuation %d digest differs from the digest of its payload", i)
		}
	}
	if got := authorityDigest(&e); got != sig.Digest(wantPayload0) {
		t.Fatal("authority digest differs from the digest of its payload")
	}
	if n := len(attenuationDigests(&e)); n != len(st.Attenuations) {
		t.Fatalf("%d digests for %d attenuations", n, len(st.Attenuations))
	}
}

func TestEncodeMatchesCanon(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		st := randToken(r)
		checkEncoding(t, &st)
	}
	for _, st := range []SignedToken{
		{Authority: Authority{Capabilities: []Capability{}}, Attenuations: []Attenuation{}, Signatures: []Signature{}},
		{Authority: Authority{Capabilities: []Capability{{}}}, Attenuations: []Attenuation{{
			AllowedCapabilities: &[]Capability{}, MaxBudgetMicrocents: ptr[int64](0), ExpiresAt: ptr(""), MaxChainDepth: ptr[int64](0),
		}}, Signatures: []Signature{{Covers: 0}, {Covers: AuthorityBlock}}},
		chain2(t).Unverified(),
	} {
		checkEncoding(t, &st)
	}
}

// A nil slice is written as [], never null: a decoded null therefore never
// matches its own encoding, and Parse refuses it.
func TestEncodeNilSlices(t *testing.T) {
	e := encodeToken(&SignedToken{})
	want := `{"attenuations":[],"authority":{"capabilities":[],"chainDepth":0,"contractId":"","delegatee":"","delegationId":"",` +
		`"expiresAt":"","issuedAt":"","issuer":"","maxBudgetMicrocents":0,"maxChainDepth":0,"parentDelegationId":""},"format":"","signatures":[]}`
	if string(e.all) != want {
		t.Fatalf("zero token encodes as\n%s\nwant\n%s", e.all, want)
	}
	var nilCaps []Capability
	e = encodeToken(&SignedToken{Attenuations: []Attenuation{{AllowedCapabilities: &nilCaps}}})
	if !bytes.Contains(e.all, []byte(`{"allowedCapabilities":[],"attenuator":""`)) {
		t.Fatalf("set nil capabilities encode as %s", e.all)
	}
}

func FuzzEncode(f *testing.F) {
	f.Add("docs", "/project/**", "ct_1", "\u2028\"\\\x00", int64(7), uint8(0xff))
	f.Add("", "", "", "", int64(0), uint8(0))
	f.Add("é😀", "\xff\xfe", "<>&", "\x7f", int64(canon.MaxSafeInteger), uint8(0x55))
	f.Fuzz(func(t *testing.T, a, b, c, d string, n int64, flags uint8) {
		n %= canon.MaxSafeInteger + 1
		caps := []Capability{{Namespace: a, Action: b, Resource: c}, {Namespace: d, Action: a, Resource: b}}
		st := SignedToken{
			Format: d,
			Authority: Authority{
				Issuer: a, Delegatee: b, Capabilities: caps[:flags%3], ContractID: c, DelegationID: d,
				ParentDelegationID: a + b, ChainDepth: n, MaxChainDepth: -n, MaxBudgetMicrocents: n / 3, ExpiresAt: b + c, IssuedAt: c + d,
			},
			Attenuations: []Attenuation{{Attenuator: d, Delegatee: c, DelegationID: b, ContractID: a}},
			Signatures:   []Signature{{Signer: a, Signature: d, Covers: Covers(int(flags%18) - 1)}},
		}
		at := &st.Attenuations[0]
		if flags&0x10 != 0 {
			at.AllowedCapabilities = &caps
		}
		if flags&0x20 != 0 {
			at.MaxBudgetMicrocents = &n
		}
		if flags&0x40 != 0 {
			at.ExpiresAt = &a
		}
		if flags&0x80 != 0 {
			at.MaxChainDepth = ptr(-n)
		}
		if flags&0x08 != 0 {
			st.Attenuations = append(st.Attenuations, *at)
		}
		checkEncoding(t, &st)
	})
}
