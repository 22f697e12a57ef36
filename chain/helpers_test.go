package chain

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
)

// Fixed keys and times make every token and record deterministic.
var (
	rootKey  = testKey(1, "root")
	aliceKey = testKey(2, "alice")
	bobKey   = testKey(3, "bob")
	carolKey = testKey(4, "carol")
	daveKey  = testKey(5, "dave")
	evilKey  = testKey(6, "evil")

	// t0 is when every test token is issued and every root created.
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func testKey(b byte, name string) *identity.Keypair {
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
	if err != nil {
		panic(err)
	}
	return k
}

// delID is the delegation ID del_ + n as 12 hex digits.
func delID(n int) string { return fmt.Sprintf("del_%012x", n) }

// ts is t0 plus a number of minutes, as a record writes it.
func ts(minutes int) string {
	return t0.Add(time.Duration(minutes) * time.Minute).Format("2006-01-02T15:04:05.000Z")
}

var caps = []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}}

// rootParams: root grants alice the project for an hour, up to maxDepth
// re-delegations, as delegation 1 under contract ct_000000000001.
func rootParams(maxDepth int64) dct.CreateParams {
	return dct.CreateParams{
		Issuer: rootKey, Delegatee: aliceKey.ID(), Capabilities: caps,
		ContractID: "ct_000000000001", DelegationID: delID(1),
		MaxChainDepth: maxDepth, MaxBudgetMicrocents: 1000,
		IssuedAt: t0, ExpiresAt: t0.Add(time.Hour),
	}
}

func mustCreate(tb testing.TB, p dct.CreateParams) *dct.Token {
	tb.Helper()
	tok, err := dct.Create(p)
	if err != nil {
		tb.Fatalf("Create: %v", err)
	}
	return tok
}

func mustAttenuate(tb testing.TB, parent *dct.Token, from, to *identity.Keypair, id string) *dct.Token {
	tb.Helper()
	tok, err := dct.Attenuate(parent, dct.AttenuateParams{Attenuator: from, Delegatee: to.ID(), DelegationID: id, Now: t0})
	if err != nil {
		tb.Fatalf("Attenuate: %v", err)
	}
	return tok
}

// encode serializes a hand-built token and parses it back.
func encode(tb testing.TB, st dct.SignedToken) *dct.Token {
	tb.Helper()
	b, err := canon.Marshal(st)
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := dct.Parse(b64.Encode(b))
	if err != nil {
		tb.Fatalf("Parse of a hand-built token: %v", err)
	}
	return tok
}

// resign replaces the signatures of st: the authority signed by keys[0],
// attenuation i by keys[i+1], each signature naming its key as signer.
func resign(tb testing.TB, st *dct.SignedToken, keys ...*identity.Keypair) {
	tb.Helper()
	if len(keys) != 1+len(st.Attenuations) {
		tb.Fatalf("resign: %d keys for %d blocks", len(keys), 1+len(st.Attenuations))
	}
	st.Signatures = []dct.Signature{{Signer: keys[0].ID(), Covers: dct.AuthorityBlock,
		Signature: signValue(tb, keys[0], struct {
			Authority dct.Authority `json:"authority"`
		}{st.Authority})}}
	for i := range st.Attenuations {
		st.Signatures = append(st.Signatures, dct.Signature{Signer: keys[i+1].ID(), Covers: dct.Covers(i),
			Signature: signValue(tb, keys[i+1], struct {
				Attenuations []dct.Attenuation `json:"attenuations"`
				Authority    dct.Authority     `json:"authority"`
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

// forge appends an attenuation to parent signed by signer, with none of
// the checks of dct.Attenuate: for tokens a verifier would refuse.
func forge(tb testing.TB, parent *dct.Token, signer *identity.Keypair, at dct.Attenuation) *dct.Token {
	tb.Helper()
	st := parent.Unverified()
	st.Attenuations = append(st.Attenuations, at)
	i := len(st.Attenuations) - 1
	st.Signatures = append(st.Signatures, dct.Signature{Signer: signer.ID(), Covers: dct.Covers(i),
		Signature: signValue(tb, signer, struct {
			Attenuations []dct.Attenuation `json:"attenuations"`
			Authority    dct.Authority     `json:"authority"`
		}{st.Attenuations, st.Authority})})
	return encode(tb, st)
}

// record is the record of tok: its last block's IDs and delegatee, with
// the given parent, delegator and depth, created minutes after t0.
func record(tok *dct.Token, parentID, from string, depth int64, minutes int) Delegation {
	t := tok.Unverified()
	id, contract := t.Authority.DelegationID, t.Authority.ContractID
	if n := len(t.Attenuations); n > 0 {
		id, contract = t.Attenuations[n-1].DelegationID, t.Attenuations[n-1].ContractID
	}
	d := Delegation{
		ID: id, ParentID: parentID, From: from, To: tok.Delegatee(), ContractID: contract,
		DCT: tok.Serialized(), Depth: depth, Status: StatusActive, CreatedAt: ts(minutes),
	}
	if len(t.Signatures) == tok.Blocks() {
		keyed(&d, tok)
	}
	return d
}

// keyed sets a record's keys as a store does.
func keyed(d *Delegation, tok *dct.Token) {
	if err := setKeys(d, tok); err != nil {
		panic(err)
	}
}

// fixture is the standard chain root → alice → bob → carol, with each
// token and record. The root allows 3 re-delegations.
type fixture struct {
	rootTok, aTok, bTok *dct.Token
	root, a, b          Delegation
}

func newFixture(tb testing.TB) fixture {
	tb.Helper()
	var f fixture
	f.rootTok = mustCreate(tb, rootParams(3))
	f.aTok = mustAttenuate(tb, f.rootTok, aliceKey, bobKey, delID(2))
	f.bTok = mustAttenuate(tb, f.aTok, bobKey, carolKey, delID(3))
	f.root = record(f.rootTok, dct.RootParentDelegationID, rootKey.ID(), 0, 0)
	f.a = record(f.aTok, f.root.ID, aliceKey.ID(), 1, 1)
	f.b = record(f.bTok, f.a.ID, bobKey.ID(), 2, 2)
	return f
}

func mustInsert(tb testing.TB, s Store, ds ...Delegation) {
	tb.Helper()
	for _, d := range ds {
		if err := s.Insert(d); err != nil {
			tb.Fatalf("Insert %s: %v", d.ID, err)
		}
	}
}

func mustList(tb testing.TB, s Store) []Delegation {
	tb.Helper()
	ds, err := s.List()
	if err != nil {
		tb.Fatalf("List: %v", err)
	}
	return ds
}

func ids(ds []Delegation) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// storeKind makes empty stores of one implementation, so that every
// behavioural test runs against Memory and File alike.
type storeKind struct {
	name string
	open func(tb testing.TB) Store
	// reopen returns the store as a restart would find it.
	reopen func(tb testing.TB, s Store) Store
}

var storeKinds = []storeKind{
	{
		name:   "Memory",
		open:   func(testing.TB) Store { return NewMemory() },
		reopen: func(_ testing.TB, s Store) Store { return s },
	},
	{
		name: "File",
		open: func(tb testing.TB) Store {
			return mustOpen(tb, filepath.Join(tb.TempDir(), "chain.log"))
		},
		reopen: func(tb testing.TB, s Store) Store {
			f := s.(*File)
			if err := f.Close(); err != nil {
				tb.Fatal(err)
			}
			return mustOpen(tb, f.path)
		},
	},
}

func mustOpen(tb testing.TB, path string) *File {
	tb.Helper()
	f, err := OpenFile(path)
	if err != nil {
		tb.Fatalf("OpenFile: %v", err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// wantErr fails unless err matches want (errors.Is).
func wantErr(tb testing.TB, err, want error) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("accepted; want an error matching %v", want)
	}
	if !errors.Is(err, want) {
		tb.Fatalf("got %v; want an error matching %v", err, want)
	}
}
