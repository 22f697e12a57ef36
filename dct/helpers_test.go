package dct

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
)

// Fixed keys and times make every token in the tests, examples and
// benchmarks deterministic.
var (
	rootKey  = testKey(1, "root")
	aliceKey = testKey(2, "alice")
	bobKey   = testKey(3, "bob")
	carolKey = testKey(4, "carol")
	daveKey  = testKey(5, "dave")
	evilKey  = testKey(6, "evil")

	// t0 is the issue time of every test token; tokens expire at t0+1h.
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func testKey(b byte, name string) *identity.Keypair {
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
	if err != nil {
		panic(err)
	}
	return k
}

func ptr[T any](v T) *T { return &v }

var projectCaps = []Capability{
	{Namespace: "docs", Action: "read", Resource: "/project/**"},
	{Namespace: "docs", Action: "write", Resource: "/project/drafts/*"},
}

// rootParams are the parameters of the standard root token: root grants
// alice projectCaps for an hour, budget 1000, up to 3 attenuations.
func rootParams() CreateParams {
	return CreateParams{
		Issuer:              rootKey,
		Delegatee:           aliceKey.ID(),
		Capabilities:        projectCaps,
		ContractID:          "ct_000000000001",
		DelegationID:        "del_000000000001",
		MaxChainDepth:       3,
		MaxBudgetMicrocents: 1000,
		ExpiresAt:           t0.Add(time.Hour),
		IssuedAt:            t0,
	}
}

func mustCreate(tb testing.TB, p CreateParams) *Token {
	tb.Helper()
	tok, err := Create(p)
	if err != nil {
		tb.Fatalf("Create: %v", err)
	}
	return tok
}

func mustAttenuate(tb testing.TB, parent *Token, p AttenuateParams) *Token {
	tb.Helper()
	if p.Now.IsZero() {
		p.Now = t0
	}
	tok, err := Attenuate(parent, p)
	if err != nil {
		tb.Fatalf("Attenuate: %v", err)
	}
	return tok
}

// chain2 is the standard two-attenuation token: root → alice → bob → carol.
// The first attenuation sets every optional field, the second none.
func chain2(tb testing.TB) *Token {
	tb.Helper()
	tok := mustCreate(tb, rootParams())
	tok = mustAttenuate(tb, tok, AttenuateParams{
		Attenuator:          aliceKey,
		Delegatee:           bobKey.ID(),
		DelegationID:        "del_000000000002",
		ContractID:          "ct_000000000002",
		Capabilities:        &[]Capability{{Namespace: "docs", Action: "read", Resource: "/project/sub/**"}},
		MaxBudgetMicrocents: ptr[int64](500),
		ExpiresAt:           ptr(t0.Add(30 * time.Minute)),
		MaxChainDepth:       ptr[int64](1),
	})
	return mustAttenuate(tb, tok, AttenuateParams{
		Attenuator:   bobKey,
		Delegatee:    carolKey.ID(),
		DelegationID: "del_000000000003",
	})
}

// chainN is a token with n attenuations, each narrowing nothing, from a
// root allowing exactly n. Delegatees alternate alice, bob, carol, dave.
func chainN(tb testing.TB, n int) *Token {
	tb.Helper()
	p := rootParams()
	p.MaxChainDepth = int64(n)
	tok := mustCreate(tb, p)
	keys := []*identity.Keypair{aliceKey, bobKey, carolKey, daveKey}
	for i := 0; i < n; i++ {
		tok = mustAttenuate(tb, tok, AttenuateParams{
			Attenuator:   keys[i%len(keys)],
			Delegatee:    keys[(i+1)%len(keys)].ID(),
			DelegationID: "del_" + string(rune('a'+i)) + "00000000000",
		})
	}
	return tok
}

func mustVerifier(tb testing.TB, o Options) *Verifier {
	tb.Helper()
	if o.Roots == nil {
		o.Roots = []string{rootKey.ID()}
	}
	v, err := NewVerifier(o)
	if err != nil {
		tb.Fatalf("NewVerifier: %v", err)
	}
	return v
}

// readReq is a request the standard tokens grant at t0.
func readReq() Request {
	return Request{Namespace: "docs", Action: "read", Resource: "/project/sub/a.txt", Now: t0.Add(time.Minute)}
}

// serialize writes a token the way a careful forger would: canonical JSON
// through the generic canonicalizer, then base64url, so a refusal of the
// result is about its content and not its encoding.
func serialize(tb testing.TB, st SignedToken) string {
	tb.Helper()
	b, err := canon.Marshal(st)
	if err != nil {
		tb.Fatalf("canon.Marshal: %v", err)
	}
	return b64.Encode(b)
}

// decodeJSON returns the JSON inside a serialized token.
func decodeJSON(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := b64.Decode(s)
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	return b
}

// deepCopy copies a SignedToken through JSON, independently of the
// package's own clone.
func deepCopy(tb testing.TB, st SignedToken) SignedToken {
	tb.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		tb.Fatal(err)
	}
	var out SignedToken
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatal(err)
	}
	return out
}

// sign replaces the signatures of st: the authority signed by keys[0],
// attenuation i by keys[i+1]. Payloads are built with the generic
// canonicalizer, independently of the package's encoder. Signer is the
// signing key's ID. Use it to build tokens that Attenuate would refuse.
func sign(tb testing.TB, st *SignedToken, keys ...*identity.Keypair) {
	tb.Helper()
	if len(keys) != 1+len(st.Attenuations) {
		tb.Fatalf("sign: %d keys for %d blocks", len(keys), 1+len(st.Attenuations))
	}
	st.Signatures = []Signature{{Signer: keys[0].ID(), Covers: AuthorityBlock,
		Signature: signValue(tb, keys[0], struct {
			Authority Authority `json:"authority"`
		}{st.Authority})}}
	for i := range st.Attenuations {
		st.Signatures = append(st.Signatures, Signature{Signer: keys[i+1].ID(), Covers: Covers(i),
			Signature: signValue(tb, keys[i+1], struct {
				Attenuations []Attenuation `json:"attenuations"`
				Authority    Authority     `json:"authority"`
			}{st.Attenuations[:i+1], st.Authority})})
	}
}

func signValue(tb testing.TB, k *identity.Keypair, v any) string {
	tb.Helper()
	s, err := sig.Sign(k.PrivateKey(), v)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// handToken builds and signs a token by hand: authority a from root (or
// the given issuer key) and the attenuations, each signed by the key whose
// ID is its attenuator.
func handToken(tb testing.TB, a Authority, atts []Attenuation, keys ...*identity.Keypair) string {
	tb.Helper()
	if atts == nil {
		atts = []Attenuation{}
	}
	st := SignedToken{Format: Format, Authority: a, Attenuations: atts}
	sign(tb, &st, keys...)
	return serialize(tb, st)
}

// baseAuthority is the authority of rootParams, as written.
func baseAuthority() Authority {
	return Authority{
		Issuer:              rootKey.ID(),
		Delegatee:           aliceKey.ID(),
		Capabilities:        append([]Capability{}, projectCaps...),
		ContractID:          "ct_000000000001",
		DelegationID:        "del_000000000001",
		ParentDelegationID:  RootParentDelegationID,
		ChainDepth:          0,
		MaxChainDepth:       3,
		MaxBudgetMicrocents: 1000,
		ExpiresAt:           "2026-01-01T01:00:00.000Z",
		IssuedAt:            "2026-01-01T00:00:00.000Z",
	}
}

// att is an attenuation from one key to another that narrows nothing.
func att(from, to *identity.Keypair, del string) Attenuation {
	return Attenuation{Attenuator: from.ID(), Delegatee: to.ID(), DelegationID: del, ContractID: "ct_000000000001"}
}

// wantDenial fails unless err is a *Denial of the wanted type.
func wantDenial(tb testing.TB, err error, want *Denial) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("accepted; want %s", want.Type)
	}
	var d *Denial
	if !errors.As(err, &d) {
		tb.Fatalf("error %v (%T) is not a *Denial", err, err)
	}
	if !errors.Is(err, want) {
		tb.Fatalf("denied with %q; want %s", err, want.Type)
	}
}

// fakeRevocations revokes the listed block IDs, or fails with err.
type fakeRevocations struct {
	mu      sync.Mutex
	revoked map[string]bool
	err     error
	calls   int
	gotIDs  []string
	gotSign []string
}

var _ Revocations = (*fakeRevocations)(nil)

func (f *fakeRevocations) Revoked(ids, signers []string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.gotIDs, f.gotSign = append([]string(nil), ids...), append([]string(nil), signers...)
	if f.err != nil {
		return "", false, f.err
	}
	for _, id := range ids {
		if f.revoked[id] {
			return id, true, nil
		}
	}
	return "", false, nil
}

func (f *fakeRevocations) revoke(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.revoked == nil {
		f.revoked = map[string]bool{}
	}
	f.revoked[id] = true
}
