package chain

import (
	"errors"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
)

func TestRecords(t *testing.T) {
	f := newFixture(t)
	ds, err := Records(f.bTok, t0)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Delegation{f.root, f.a, f.b} {
		want.CreatedAt = ts(0)
		if ds[i] != want {
			t.Fatalf("record %d: %+v; want %+v", i, ds[i], want)
		}
	}
	// A proxy records a chain as it sees it, skipping what it has.
	s := NewMemory()
	short, err := Records(f.aTok, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, short...)
	for _, d := range ds {
		if err := s.Insert(d); err != nil && !errors.Is(err, ErrDuplicate) {
			t.Fatal(err)
		}
	}
	if n := len(mustList(t, s)); n != 3 {
		t.Fatalf("%d records; want 3", n)
	}
}

func TestRecordsRefuses(t *testing.T) {
	f := newFixture(t)
	unsigned := f.bTok.Unverified()
	unsigned.Signatures = unsigned.Signatures[:1]
	p := rootParams(3)
	p.ParentDelegationID = delID(0x42)
	cont := mustCreate(t, p)
	p = rootParams(3)
	p.DelegationID = "del_root"
	badID := mustCreate(t, p)
	cases := map[string]struct {
		tok  *dct.Token
		want error
	}{
		"signatures missing": {encode(t, unsigned), ErrTokenMismatch},
		"continues a chain":  {mustAttenuate(t, cont, aliceKey, bobKey, delID(2)), ErrRoot},
		"bad delegation id":  {badID, ErrMalformed},
		"bad child id":       {mustAttenuate(t, f.rootTok, aliceKey, bobKey, "del_two"), ErrMalformed},
		"attenuator is not the holder": {
			forge(t, f.aTok, evilKey, dct.Attenuation{Attenuator: evilKey.ID(), Delegatee: carolKey.ID(), DelegationID: delID(3), ContractID: "ct_000000000001"}),
			ErrFromMismatch, // the record's from is the first attenuator
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Records(c.tok, t0)
			wantErr(t, err, c.want)
		})
	}
	_, err := Records(f.bTok, time.Time{})
	wantErr(t, err, ErrMalformed)
}

func TestNewRootAndChild(t *testing.T) {
	f := newFixture(t)
	root, err := NewRoot(f.rootTok, t0)
	if err != nil || root != f.root {
		t.Fatalf("NewRoot: %+v, %v; want %+v", root, err, f.root)
	}
	a, err := NewChild(f.root, f.aTok, t0.Add(time.Minute))
	if err != nil || a != f.a {
		t.Fatalf("NewChild: %+v, %v; want %+v", a, err, f.a)
	}
	_, err = NewRoot(f.aTok, t0)
	wantErr(t, err, ErrRoot)
	_, err = NewChild(f.a, f.aTok, t0)
	wantErr(t, err, ErrNotAttenuation)
	_, err = NewChild(f.root, f.bTok, t0) // from alice, but bob made the last block: fine, two blocks added
	if err != nil {
		t.Fatalf("NewChild adding two blocks: %v", err)
	}
	ended := f.a
	ended.Status = StatusCompleted
	_, err = NewChild(ended, f.bTok, t0)
	wantErr(t, err, ErrParentInactive)
	garbled := f.a
	garbled.DCT.Token = "x"
	_, err = NewChild(garbled, f.bTok, t0)
	wantErr(t, err, ErrMalformed)
	_, err = NewChild(f.a, f.bTok, time.Time{})
	wantErr(t, err, ErrMalformed)
	_, err = NewRoot(f.rootTok, time.Time{})
	wantErr(t, err, ErrMalformed)
}
