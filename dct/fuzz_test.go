package dct

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
)

// fuzzSeeds are valid tokens of every shape: root, attenuated with and
// without optional fields, and at the length limits.
func fuzzSeeds(tb testing.TB) []*Token {
	tb.Helper()
	a := baseAuthority()
	a.ContractID = "ct_\u2028\"\\\x01é😀"
	a.Capabilities = append(a.Capabilities, Capability{"*", "*", "*"})
	odd, err := Parse(handToken(tb, a, []Attenuation{withBudget(withExpiry(a0, "2026-01-01T00:30:00+02:00"), 0), withCaps(a1)}, rootKey, aliceKey, bobKey))
	if err != nil {
		tb.Fatal(err)
	}
	return []*Token{mustCreate(tb, rootParams()), chain2(tb), chainN(tb, 3), odd}
}

func FuzzParse(f *testing.F) {
	for _, tok := range fuzzSeeds(f) {
		s := tok.String()
		f.Add(s)
		f.Add(string(decodeJSON(f, s)))
		f.Add(`{"token":"` + s + `","format":"` + Format + `"}`)
	}
	for _, s := range []string{"", "{", "{}", `{"token":"","format":""}`, "e30", "bnVsbA", "=", "\xff", " \n "} {
		f.Add(s)
	}
	v, err := NewVerifier(Options{Roots: []string{rootKey.ID()}, CacheSize: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkParsed(t, v, s)
		// The same bytes as the JSON inside a token reach the decoder.
		checkParsed(t, v, b64.Encode([]byte(s)))
		if _, err := ParseInput(s); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseInput error %v is not malformed_token", err)
		}
		tok, err := ParseInput(s)
		if err == nil && !strings.HasPrefix(strings.TrimSpace(s), "{") && tok.String() != strings.TrimSpace(s) {
			t.Fatalf("ParseInput(%q).String() = %q", s, tok.String())
		}
	})
}

// checkParsed holds Parse to its contract for any input: a malformed_token
// denial, or a token that is exactly the canonical form of what it decodes
// to, parses back identically and can be inspected and verified safely.
func checkParsed(t *testing.T, v *Verifier, s string) {
	t.Helper()
	tok, err := Parse(s)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("Parse error %v is not malformed_token", err)
		}
		return
	}
	if tok.String() != s {
		t.Fatalf("String() = %q, parsed %q", tok.String(), s)
	}
	c, err := canon.Marshal(tok.Unverified())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c, decodeJSON(t, s)) {
		t.Fatalf("accepted non-canonical JSON %q (canonical %q)", decodeJSON(t, s), c)
	}
	again, err := Parse(tok.String())
	if err != nil {
		t.Fatalf("reparse: %v", err)
	}
	if !reflect.DeepEqual(again.Unverified(), tok.Unverified()) || !reflect.DeepEqual(again.RevocationIDs(), tok.RevocationIDs()) {
		t.Fatal("reparse differs")
	}
	if len(tok.RevocationIDs()) != tok.Blocks() || len(tok.Signers()) != tok.Blocks() {
		t.Fatal("block counts differ")
	}
	_ = tok.Delegatee()
	_ = tok.Inspect()
	if scope, err := v.VerifyToken(tok, readReq()); err == nil && scope.Issuer != rootKey.ID() {
		t.Fatalf("accepted a token from %s", scope.Issuer)
	}
}

// FuzzVerify mutates the JSON of valid tokens. Without the keys the only
// tokens that can verify are the seeds and the prefixes of their chains
// (a delegate can always drop the blocks after its own).
func FuzzVerify(f *testing.F) {
	allowed := map[string]bool{}
	for _, tok := range fuzzSeeds(f) {
		f.Add(decodeJSON(f, tok.String()))
		st := tok.Unverified()
		for n := 0; n <= len(st.Attenuations); n++ {
			p := deepCopy(f, st)
			p.Attenuations, p.Signatures = p.Attenuations[:n], p.Signatures[:n+1]
			allowed[serialize(f, p)] = true
		}
	}
	revs := &fakeRevocations{}
	v, err := NewVerifier(Options{Roots: []string{rootKey.ID()}, CacheSize: -1, Revocations: revs})
	if err != nil {
		f.Fatal(err)
	}
	reqs := []Request{readReq(), {Namespace: "docs", Action: "write", Resource: "/project/drafts/x", Now: t0}}
	check := func(t *testing.T, data []byte) {
		s := b64.Encode(data)
		for _, req := range reqs {
			scope, err := v.Verify(s, req)
			if err != nil {
				var d *Denial
				if !errors.As(err, &d) {
					t.Fatalf("error %v is not a *Denial", err)
				}
				continue
			}
			if scope.Issuer != rootKey.ID() {
				t.Fatalf("accepted a token from %s", scope.Issuer)
			}
			if !allowed[s] {
				t.Fatalf("accepted a token that is not a prefix of a signed chain: %s", data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, data)
		// Most mutations break the canonical form; re-canonicalizing what
		// encoding/json reads from them, as a forger would, takes the
		// changed values through the signature and chain checks.
		var st SignedToken
		if json.Unmarshal(data, &st) == nil {
			if c, err := canon.Marshal(st); err == nil && !bytes.Equal(c, data) {
				check(t, c)
			}
		}
	})
}
