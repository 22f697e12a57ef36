package revocation_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/revocation"
)

var (
	_ dct.Revocations = (*revocation.List)(nil)
	_ dct.Revocations = (*revocation.File)(nil)
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func key(t testing.TB, n byte) *identity.Keypair {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{n}, 32), "")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// chain returns tokens root→keys[1], then attenuated to keys[2], keys[3], ...:
// tokens[i] has i+1 blocks, block j signed by keys[j].
func chain(t testing.TB, keys []*identity.Keypair) []*dct.Token {
	t.Helper()
	tok, err := dct.Create(dct.CreateParams{
		Issuer: keys[0], Delegatee: keys[1].ID(),
		Capabilities: []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/**"}},
		ContractID:   "ct_000000000001", DelegationID: "del_000000000001",
		MaxChainDepth: int64(len(keys)), MaxBudgetMicrocents: 1000,
		ExpiresAt: now.Add(time.Hour), IssuedAt: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	tokens := []*dct.Token{tok}
	for i := 1; i+1 < len(keys); i++ {
		tok, err = dct.Attenuate(tok, dct.AttenuateParams{
			Attenuator: keys[i], Delegatee: keys[i+1].ID(),
			DelegationID: fmt.Sprintf("del_%012d", i+1), Now: now,
		})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok)
	}
	return tokens
}

var request = dct.Request{Namespace: "docs", Action: "read", Resource: "/a", Now: now}

// The honouring and scope rules, end to end through a dct.Verifier.
func TestVerifierWithRevocations(t *testing.T) {
	keys := []*identity.Keypair{key(t, 1), key(t, 2), key(t, 3), key(t, 4)} // root, a, b, c
	stranger := key(t, 9)
	tokens := chain(t, keys) // root→a, a→b, b→c
	ids := tokens[2].RevocationIDs()
	tests := []struct {
		name    string
		by      *identity.Keypair
		block   int
		scope   revocation.Scope
		revoked []bool // for tokens[0], tokens[1], tokens[2]
	}{
		{"root revokes a's attenuation, chain", keys[0], 1, revocation.ScopeChain, []bool{false, true, true}},
		{"root revokes a's attenuation, block", keys[0], 1, revocation.ScopeBlock, []bool{false, true, true}},
		{"a revokes its own attenuation", keys[1], 1, revocation.ScopeChain, []bool{false, true, true}},
		{"a revokes b's attenuation", keys[1], 2, revocation.ScopeChain, []bool{false, false, true}},
		{"b cannot revoke a's attenuation", keys[2], 1, revocation.ScopeChain, []bool{false, false, false}},
		{"a cannot revoke the authority", keys[1], 0, revocation.ScopeChain, []bool{false, false, false}},
		{"root revokes the authority, chain", keys[0], 0, revocation.ScopeChain, []bool{true, true, true}},
		{"root revokes the authority, block", keys[0], 0, revocation.ScopeBlock, []bool{true, true, true}},
		{"b cannot revoke a's attenuation, block", keys[2], 1, revocation.ScopeBlock, []bool{false, false, false}},
		{"a stranger cannot revoke", stranger, 2, revocation.ScopeChain, []bool{false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := revocation.NewList()
			e, err := revocation.NewEntry(tt.by, ids[tt.block], tt.scope, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Add(e); err != nil {
				t.Fatal(err)
			}
			v, err := dct.NewVerifier(dct.Options{Roots: []string{keys[0].ID()}, Revocations: l})
			if err != nil {
				t.Fatal(err)
			}
			for i, tok := range tokens {
				for range 2 { // uncached, then cached
					_, err := v.Verify(tok.String(), request)
					var d *dct.Denial
					switch {
					case tt.revoked[i] && (!errors.As(err, &d) || d.Type != dct.Revoked || d.RevocationID != ids[tt.block]):
						t.Errorf("token %d: got %v, want revoked %s", i, err, ids[tt.block])
					case !tt.revoked[i] && err != nil:
						t.Errorf("token %d: got %v, want accepted", i, err)
					}
				}
			}
		})
	}
}

// A File that cannot be read denies every token.
func TestVerifierFailsClosedOnFile(t *testing.T) {
	keys := []*identity.Keypair{key(t, 1), key(t, 2), key(t, 3)}
	tok := chain(t, keys)[1]
	path := filepath.Join(t.TempDir(), "list.json")
	e, _ := revocation.NewEntry(keys[0], revocationID(1), revocation.ScopeBlock, now)
	if err := revocation.Append(path, e); err != nil {
		t.Fatal(err)
	}
	f, err := revocation.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := dct.NewVerifier(dct.Options{Roots: []string{keys[0].ID()}, Revocations: f})
	if _, err := v.Verify(tok.String(), request); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(tok.String(), request); !errors.Is(err, dct.ErrRevoked) {
		t.Fatalf("corrupt list: got %v, want a revoked denial", err)
	}
}

// The whole cached verification of a token (signatures and chain checked
// before, revocation and request checked on every call) with a revocation
// list of 10,000 entries that do not name the token.
func BenchmarkVerifyCached(b *testing.B) {
	keys := make([]*identity.Keypair, 10)
	for i := range keys {
		keys[i] = key(b, byte(i+1))
	}
	tokens := chain(b, keys)
	l := revocation.NewList()
	for i := range 10_000 {
		e, err := revocation.NewEntry(keys[0], revocationID(i), revocation.ScopeChain, now)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Add(e); err != nil {
			b.Fatal(err)
		}
	}
	for _, blocks := range []int{1, 9} {
		tok := tokens[blocks-1].String()
		for _, revs := range []struct {
			name string
			r    dct.Revocations
		}{{"none", nil}, {"entries=10000", l}} {
			b.Run(fmt.Sprintf("blocks=%d/revocations=%s", blocks, revs.name), func(b *testing.B) {
				v, err := dct.NewVerifier(dct.Options{Roots: []string{keys[0].ID()}, Revocations: revs.r})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := v.Verify(tok, request); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := v.Verify(tok, request); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func revocationID(i int) string {
	var id [32]byte
	copy(id[:], fmt.Sprintf("%032d", i))
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// The per-call verification of a cached token (VerifyChain, as the proxy's
// gate calls it) with a File of 100,000 entries that do not name the token
// as its revocations, the file unchanged: one stat and the lookups.
func BenchmarkVerifyChainCachedFile(b *testing.B) {
	keys := make([]*identity.Keypair, 10)
	for i := range keys {
		keys[i] = key(b, byte(i+1))
	}
	tokens := chain(b, keys)
	f := revocation.BenchListFile(b, 100_000)
	for _, blocks := range []int{1, 9} {
		tok := tokens[blocks-1].String()
		for _, revs := range []struct {
			name string
			r    dct.Revocations
		}{{"none", nil}, {"file-entries=100000", f}} {
			b.Run(fmt.Sprintf("blocks=%d/revocations=%s", blocks, revs.name), func(b *testing.B) {
				v, err := dct.NewVerifier(dct.Options{Roots: []string{keys[0].ID()}, Revocations: revs.r})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := v.VerifyChain(tok, now); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := v.VerifyChain(tok, now); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
