package chain

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

func TestInsertChain(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			f := newFixture(t)
			s := k.open(t)
			mustInsert(t, s, f.root, f.a, f.b)
			s = k.reopen(t, s)
			if got := ids(mustList(t, s)); !slices.Equal(got, []string{delID(1), delID(2), delID(3)}) {
				t.Fatalf("List: %v", got)
			}
			for _, want := range []Delegation{f.root, f.a, f.b} {
				got, err := s.Get(want.ID)
				if err != nil || got != want {
					t.Fatalf("Get(%s) = %+v, %v; want %+v", want.ID, got, err, want)
				}
			}
			if _, err := s.Get(delID(9)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Get of an unknown ID: %v; want fs.ErrNotExist", err)
			}
		})
	}
}

// A child may add several blocks at once, and contract IDs may change
// along the chain; a delegation may have several children.
func TestInsertChildVariants(t *testing.T) {
	f := newFixture(t)
	s := NewMemory()
	mustInsert(t, s, f.root, f.a)
	// alice → bob → carol in one record: from is alice (the first added
	// block's attenuator), to is carol.
	two := mustAttenuate(t, mustAttenuate(t, f.rootTok, aliceKey, bobKey, delID(0x20)), bobKey, carolKey, delID(0x21))
	mustInsert(t, s, record(two, f.root.ID, aliceKey.ID(), 1, 3))
	// A new contract for bob's sub-delegation.
	tok, err := dct.Attenuate(f.aTok, dct.AttenuateParams{Attenuator: bobKey, Delegatee: daveKey.ID(), DelegationID: delID(0x30), ContractID: "ct_00000000000b", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, f.b, record(tok, f.a.ID, bobKey.ID(), 2, 4))
	if n := len(mustList(t, s)); n != 5 {
		t.Fatalf("%d records; want 5", n)
	}
}

// Each case breaks one rule; it must be refused with that rule's error and
// leave the store as it was. Every case passes every other check, so a
// case fails if its check is removed.
func TestInsertRefuses(t *testing.T) {
	f := newFixture(t)
	type setup struct {
		pre  []Delegation // inserted first
		ops  func(t *testing.T, s Store)
		rec  Delegation
		want error
	}
	// A root whose maxChainDepth of 1 a grandchild passes.
	shallow := mustCreate(t, rootParams(1))
	shallowA := mustAttenuate(t, shallow, aliceKey, bobKey, delID(2))
	shallowB := forge(t, shallowA, bobKey, dct.Attenuation{Attenuator: bobKey.ID(), Delegatee: carolKey.ID(), DelegationID: delID(3), ContractID: "ct_000000000001"})
	shallowRoot := record(shallow, dct.RootParentDelegationID, rootKey.ID(), 0, 0)
	shallowRecA := record(shallowA, shallowRoot.ID, aliceKey.ID(), 1, 1)

	withRoot := func(mut func(p *dct.CreateParams)) Delegation {
		p := rootParams(3)
		mut(&p)
		return record(mustCreate(t, p), dct.RootParentDelegationID, rootKey.ID(), 0, 0)
	}
	mutate := func(d Delegation, mut func(d *Delegation)) Delegation { mut(&d); return d }
	ended := func(op string) func(t *testing.T, s Store) {
		return func(t *testing.T, s Store) {
			var err error
			switch op {
			case opComplete:
				err = s.Complete(f.a.ID, "", t0.Add(time.Hour))
			case opFail:
				err = s.Fail(f.a.ID, "", t0.Add(time.Hour))
			case opRevoke:
				_, err = s.Revoke(f.a.ID, t0.Add(time.Hour))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// bob's token with one signature dropped: blocks and signatures differ.
	unsigned := f.bTok.Unverified()
	unsigned.Signatures = unsigned.Signatures[:2]
	unsignedTok := encode(t, unsigned)
	// A root token with no signature at all.
	bare := f.rootTok.Unverified()
	bare.Signatures = []dct.Signature{}
	bareTok := encode(t, bare)
	// alice's delegation to carol instead of bob's: as many blocks as bob's.
	sideways := mustAttenuate(t, f.rootTok, aliceKey, carolKey, delID(3))
	// The same chain under another issuer.
	otherRootParams := rootParams(3)
	otherRootParams.Issuer = evilKey
	otherA := mustAttenuate(t, mustCreate(t, otherRootParams), aliceKey, bobKey, delID(2))
	otherB := mustAttenuate(t, otherA, bobKey, carolKey, delID(3))
	// bob's token extended by evil, who is not bob.
	hijack := forge(t, f.aTok, evilKey, dct.Attenuation{Attenuator: evilKey.ID(), Delegatee: carolKey.ID(), DelegationID: delID(3), ContractID: "ct_000000000001"})

	cases := map[string]setup{
		// §8.2.1
		"root depth 1":                 {rec: mutate(f.root, func(d *Delegation) { d.Depth = 1 }), want: ErrRoot},
		"root with an attenuation":     {rec: record(f.aTok, dct.RootParentDelegationID, aliceKey.ID(), 0, 0), want: ErrRoot},
		"root token continues a chain": {rec: withRoot(func(p *dct.CreateParams) { p.ParentDelegationID = delID(0xf) }), want: ErrRoot},
		"root token at chain depth 1":  {rec: withRoot(func(p *dct.CreateParams) { p.ChainDepth = 1 }), want: ErrRoot},
		// §8.2.2
		"no parent":            {rec: f.a, want: ErrNoParent},
		"parent unknown":       {pre: []Delegation{f.root}, rec: mutate(f.a, func(d *Delegation) { d.ParentID = delID(0x99) }), want: ErrNoParent},
		"from not parent's to": {pre: []Delegation{f.root, f.a}, rec: mutate(f.b, func(d *Delegation) { d.From = aliceKey.ID() }), want: ErrFromMismatch},
		// §8.2.3
		"depth skips":           {pre: []Delegation{f.root, f.a}, rec: mutate(f.b, func(d *Delegation) { d.Depth = 3 }), want: ErrDepth},
		"depth repeats":         {pre: []Delegation{f.root, f.a}, rec: mutate(f.b, func(d *Delegation) { d.Depth = 1 }), want: ErrDepth},
		"depth 0 with a parent": {pre: []Delegation{f.root}, rec: mutate(f.a, func(d *Delegation) { d.Depth = 0 }), want: ErrDepth},
		// §8.2.4
		"beyond root maxChainDepth": {pre: []Delegation{shallowRoot, shallowRecA}, rec: record(shallowB, shallowRecA.ID, bobKey.ID(), 2, 2), want: ErrMaxDepth},
		// §8.2.5
		"adds no block":            {pre: []Delegation{f.root, f.a}, rec: record(sideways, f.a.ID, bobKey.ID(), 2, 2), want: ErrNotAttenuation},
		"fewer blocks than parent": {pre: []Delegation{f.root, f.a}, rec: mutate(withRoot(func(p *dct.CreateParams) { p.Delegatee = carolKey.ID(); p.DelegationID = delID(3) }), func(d *Delegation) { d.ParentID, d.From, d.Depth = f.a.ID, bobKey.ID(), 2 }), want: ErrNotAttenuation},
		"another issuer's chain":   {pre: []Delegation{f.root, f.a}, rec: record(otherB, f.a.ID, bobKey.ID(), 2, 2), want: ErrNotAttenuation},
		"first block not by from":  {pre: []Delegation{f.root, f.a}, rec: record(hijack, f.a.ID, bobKey.ID(), 2, 2), want: ErrNotAttenuation},
		// Parent must be active.
		"parent completed": {pre: []Delegation{f.root, f.a}, ops: ended(opComplete), rec: f.b, want: ErrParentInactive},
		"parent failed":    {pre: []Delegation{f.root, f.a}, ops: ended(opFail), rec: f.b, want: ErrParentInactive},
		"parent revoked":   {pre: []Delegation{f.root, f.a}, ops: ended(opRevoke), rec: f.b, want: ErrParentInactive},
		// The record describes its token.
		"root from not issuer":          {rec: mutate(f.root, func(d *Delegation) { d.From = evilKey.ID() }), want: ErrTokenMismatch},
		"root to not delegatee":         {rec: mutate(f.root, func(d *Delegation) { d.To = evilKey.ID() }), want: ErrTokenMismatch},
		"root id not token's":           {rec: mutate(f.root, func(d *Delegation) { d.ID = delID(0x77) }), want: ErrTokenMismatch},
		"root contract not token's":     {rec: mutate(f.root, func(d *Delegation) { d.ContractID = "ct_0000000000ff" }), want: ErrTokenMismatch},
		"root token unsigned":           {rec: record(bareTok, dct.RootParentDelegationID, rootKey.ID(), 0, 0), want: ErrTokenMismatch},
		"child to not delegatee":        {pre: []Delegation{f.root, f.a}, rec: mutate(f.b, func(d *Delegation) { d.To = daveKey.ID() }), want: ErrTokenMismatch},
		"child id not token's":          {pre: []Delegation{f.root, f.a}, rec: mutate(f.b, func(d *Delegation) { d.ID = delID(0x77) }), want: ErrTokenMismatch},
		"child contract not token's":    {pre: []Delegation{f.root, f.a}, rec: mutate(f.b, func(d *Delegation) { d.ContractID = "ct_0000000000ff" }), want: ErrTokenMismatch},
		"child token lacks a signature": {pre: []Delegation{f.root, f.a}, rec: record(unsignedTok, f.a.ID, bobKey.ID(), 2, 2), want: ErrTokenMismatch},
		// Unique IDs.
		"duplicate root":  {pre: []Delegation{f.root}, rec: mutate(f.root, func(d *Delegation) { d.CreatedAt = ts(5) }), want: ErrDuplicate},
		"duplicate child": {pre: []Delegation{f.root, f.a}, rec: f.a, want: ErrDuplicate},
	}
	for _, k := range storeKinds {
		for name, c := range cases {
			t.Run(k.name+"/"+name, func(t *testing.T) {
				s := k.open(t)
				mustInsert(t, s, c.pre...)
				if c.ops != nil {
					c.ops(t, s)
				}
				before := mustList(t, s)
				err := s.Insert(c.rec)
				wantErr(t, err, c.want)
				var ie *InvariantError
				if errors.As(err, &ie) && ie.ID != c.rec.ID {
					t.Errorf("the error names %q, not the record %s", ie.ID, c.rec.ID)
				}
				if !slices.Equal(mustList(t, k.reopen(t, s)), before) {
					t.Fatal("a refused insert changed the store")
				}
			})
		}
	}
}

// Every field of the parent's blocks, and every signature, changed in the
// child's copy (and signed again, so the token is consistent) is refused:
// the child's token must carry the parent's blocks byte for byte.
func TestInsertRefusesTamperedParentBlocks(t *testing.T) {
	f := newFixture(t)
	tampers := map[string]func(st *dct.SignedToken){
		"authority.issuer":              func(st *dct.SignedToken) { st.Authority.Issuer = evilKey.ID() },
		"authority.delegatee":           func(st *dct.SignedToken) { st.Authority.Delegatee = evilKey.ID() },
		"authority.capabilities":        func(st *dct.SignedToken) { st.Authority.Capabilities[0].Resource = "/**" },
		"authority.contractId":          func(st *dct.SignedToken) { st.Authority.ContractID = "ct_0000000000ff" },
		"authority.delegationId":        func(st *dct.SignedToken) { st.Authority.DelegationID = delID(0xff) },
		"authority.parentDelegationId":  func(st *dct.SignedToken) { st.Authority.ParentDelegationID = delID(0xff) },
		"authority.chainDepth":          func(st *dct.SignedToken) { st.Authority.ChainDepth = 1 },
		"authority.maxChainDepth":       func(st *dct.SignedToken) { st.Authority.MaxChainDepth = 9 },
		"authority.maxBudgetMicrocents": func(st *dct.SignedToken) { st.Authority.MaxBudgetMicrocents = 9999 },
		"authority.expiresAt":           func(st *dct.SignedToken) { st.Authority.ExpiresAt = "2026-01-01T09:00:00.000Z" },
		"authority.issuedAt":            func(st *dct.SignedToken) { st.Authority.IssuedAt = "2025-12-31T23:00:00.000Z" },
		"attenuations[0].attenuator":    func(st *dct.SignedToken) { st.Attenuations[0].Attenuator = evilKey.ID() },
		"attenuations[0].delegatee":     func(st *dct.SignedToken) { st.Attenuations[0].Delegatee = evilKey.ID() },
		"attenuations[0].delegationId":  func(st *dct.SignedToken) { st.Attenuations[0].DelegationID = delID(0xff) },
		"attenuations[0].contractId":    func(st *dct.SignedToken) { st.Attenuations[0].ContractID = "ct_0000000000ff" },
		"attenuations[0].allowedCapabilities": func(st *dct.SignedToken) {
			st.Attenuations[0].AllowedCapabilities = &[]dct.Capability{caps[0]}
		},
		"attenuations[0].maxBudgetMicrocents": func(st *dct.SignedToken) { v := int64(5); st.Attenuations[0].MaxBudgetMicrocents = &v },
		"attenuations[0].expiresAt":           func(st *dct.SignedToken) { v := "2026-01-01T00:30:00.000Z"; st.Attenuations[0].ExpiresAt = &v },
		"attenuations[0].maxChainDepth":       func(st *dct.SignedToken) { v := int64(1); st.Attenuations[0].MaxChainDepth = &v },
	}
	for name, tamper := range tampers {
		t.Run(name, func(t *testing.T) {
			st := f.bTok.Unverified()
			tamper(&st)
			// Sign again with the keys the blocks now name, so that only
			// the bytes differ from the parent's, never the consistency.
			resign(t, &st, keyFor(t, st.Authority.Issuer), keyFor(t, st.Attenuations[0].Attenuator), keyFor(t, st.Attenuations[1].Attenuator))
			s := NewMemory()
			mustInsert(t, s, f.root, f.a)
			wantErr(t, s.Insert(record(encode(t, st), f.a.ID, bobKey.ID(), 2, 2)), ErrNotAttenuation)
		})
	}
	sigTampers := map[string]func(st *dct.SignedToken){
		"signatures[0].signature": func(st *dct.SignedToken) {
			st.Signatures[0].Signature = signValue(t, rootKey, "something else")
		},
		"signatures[1].signature": func(st *dct.SignedToken) {
			st.Signatures[1].Signature = signValue(t, aliceKey, "something else")
		},
		"signatures[0].signer": func(st *dct.SignedToken) { st.Signatures[0].Signer = evilKey.ID() },
		"signatures[1].signer": func(st *dct.SignedToken) { st.Signatures[1].Signer = evilKey.ID() },
		"signatures[1].covers": func(st *dct.SignedToken) { st.Signatures[1].Covers = 1 },
		"signatures[0].covers": func(st *dct.SignedToken) { st.Signatures[0].Covers = 0 },
	}
	for name, tamper := range sigTampers {
		t.Run(name, func(t *testing.T) {
			st := f.bTok.Unverified()
			tamper(&st)
			s := NewMemory()
			mustInsert(t, s, f.root, f.a)
			wantErr(t, s.Insert(record(encode(t, st), f.a.ID, bobKey.ID(), 2, 2)), ErrNotAttenuation)
		})
	}
}

// keyFor returns the test key with the given principal ID.
func keyFor(t *testing.T, id string) *identity.Keypair {
	t.Helper()
	for _, k := range []*identity.Keypair{rootKey, aliceKey, bobKey, carolKey, daveKey, evilKey} {
		if k.ID() == id {
			return k
		}
	}
	t.Fatalf("no test key %s", id)
	return nil
}

// Records refused on their own, before the chain is looked at.
func TestInsertRefusesMalformed(t *testing.T) {
	f := newFixture(t)
	mutate := func(mut func(d *Delegation)) Delegation { d := f.root; mut(&d); return d }
	cases := map[string]Delegation{
		"id upper case":         mutate(func(d *Delegation) { d.ID = "del_00000000000A" }),
		"id short":              mutate(func(d *Delegation) { d.ID = "del_00000000001" }),
		"id long":               mutate(func(d *Delegation) { d.ID = "del_0000000000001" }),
		"id prefix":             mutate(func(d *Delegation) { d.ID = "dek_000000000001" }),
		"id empty":              mutate(func(d *Delegation) { d.ID = "" }),
		"id is the root parent": mutate(func(d *Delegation) { d.ID = dct.RootParentDelegationID }),
		"parentId":              mutate(func(d *Delegation) { d.ParentID = "del_root" }),
		"parentId empty":        mutate(func(d *Delegation) { d.ParentID = "" }),
		"from":                  mutate(func(d *Delegation) { d.From = "root" }),
		"from did":              mutate(func(d *Delegation) { d.From = rootKey.DID() }),
		"to":                    mutate(func(d *Delegation) { d.To = aliceKey.ID() + "A" }),
		"contract empty":        mutate(func(d *Delegation) { d.ContractID = "" }),
		"contract too long":     mutate(func(d *Delegation) { d.ContractID = strings.Repeat("c", dct.MaxStringLen+1) }),
		"depth negative":        mutate(func(d *Delegation) { d.Depth = -1 }),
		"status completed":      mutate(func(d *Delegation) { d.Status = StatusCompleted }),
		"status empty":          mutate(func(d *Delegation) { d.Status = "" }),
		"status unknown":        mutate(func(d *Delegation) { d.Status = "paused" }),
		"createdAt empty":       mutate(func(d *Delegation) { d.CreatedAt = "" }),
		"createdAt garbage":     mutate(func(d *Delegation) { d.CreatedAt = "yesterday" }),
		"createdAt offset":      mutate(func(d *Delegation) { d.CreatedAt = "2026-01-01T01:00:00.000+01:00" }),
		"createdAt no millis":   mutate(func(d *Delegation) { d.CreatedAt = "2026-01-01T00:00:00Z" }),
		"completedAt set":       mutate(func(d *Delegation) { d.CompletedAt = ts(1) }),
		"attestationId set":     mutate(func(d *Delegation) { d.AttestationID = "att_000000000001" }),
		"dct format":            mutate(func(d *Delegation) { d.DCT.Format = "delegateos-sjt-v2" }),
		"dct token garbage":     mutate(func(d *Delegation) { d.DCT.Token = "not a token" }),
		"dct token empty":       mutate(func(d *Delegation) { d.DCT.Token = "" }),
	}
	for _, k := range storeKinds {
		for name, d := range cases {
			t.Run(k.name+"/"+name, func(t *testing.T) {
				s := k.open(t)
				wantErr(t, s.Insert(d), ErrMalformed)
				if n := len(mustList(t, s)); n != 0 {
					t.Fatalf("%d records after a refused insert", n)
				}
			})
		}
	}
}
