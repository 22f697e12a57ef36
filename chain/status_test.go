package chain

import (
	"errors"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
)

const attID = "att_0123456789ab"

// Every status change from every status: from active each succeeds and
// sets its status, completedAt and attestationId; from an ending each is
// refused with a *TransitionError and changes nothing.
func TestStatusTransitions(t *testing.T) {
	ops := []struct {
		name   string
		status Status
		do     func(s Store, id string, at time.Time) error
		att    string // the attestationId the operation records
	}{
		{"complete", StatusCompleted, func(s Store, id string, at time.Time) error { return s.Complete(id, attID, at) }, attID},
		{"complete without attestation", StatusCompleted, func(s Store, id string, at time.Time) error { return s.Complete(id, "", at) }, ""},
		{"fail", StatusFailed, func(s Store, id string, at time.Time) error { return s.Fail(id, attID, at) }, attID},
		{"fail without attestation", StatusFailed, func(s Store, id string, at time.Time) error { return s.Fail(id, "", at) }, ""},
		{"revoke", StatusRevoked, func(s Store, id string, at time.Time) error { _, err := s.Revoke(id, at); return err }, ""},
	}
	for _, k := range storeKinds {
		for _, first := range append([]int{-1}, 0, 2, 4) {
			for _, second := range ops {
				name := k.name + "/active"
				if first >= 0 {
					name = k.name + "/" + ops[first].name
				}
				t.Run(name+"/then "+second.name, func(t *testing.T) {
					f := newFixture(t)
					s := k.open(t)
					mustInsert(t, s, f.root)
					id := f.root.ID
					if first >= 0 {
						if err := ops[first].do(s, id, t0.Add(time.Minute)); err != nil {
							t.Fatal(err)
						}
						s = k.reopen(t, s)
					}
					before, _ := s.Get(id)
					err := second.do(s, id, t0.Add(2*time.Minute))
					after, gerr := k.reopen(t, s).Get(id)
					if gerr != nil {
						t.Fatal(gerr)
					}
					if first < 0 {
						if err != nil {
							t.Fatal(err)
						}
						want := f.root
						want.Status, want.CompletedAt, want.AttestationID = second.status, ts(2), second.att
						if after != want {
							t.Fatalf("after %s: %+v; want %+v", second.name, after, want)
						}
						return
					}
					wantErr(t, err, ErrTerminal)
					var te *TransitionError
					if !errors.As(err, &te) || te.ID != id || te.From != ops[first].status || te.To != second.status {
						t.Fatalf("error %#v; want a *TransitionError from %s to %s", err, ops[first].status, second.status)
					}
					if after != before {
						t.Fatalf("a refused change changed %+v into %+v", before, after)
					}
				})
			}
		}
	}
}

func TestStatusRefuses(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			f := newFixture(t)
			s := k.open(t)
			mustInsert(t, s, f.root)
			at := t0.Add(time.Minute)
			for _, att := range []string{"att_0123456789AB", "att_123", "del_0123456789ab", "x"} {
				wantErr(t, s.Complete(f.root.ID, att, at), ErrMalformed)
				wantErr(t, s.Fail(f.root.ID, att, at), ErrMalformed)
			}
			wantErr(t, s.Complete(f.root.ID, attID, time.Time{}), ErrMalformed)
			_, err := s.Revoke(f.root.ID, time.Time{})
			wantErr(t, err, ErrMalformed)
			wantErr(t, s.Complete(f.root.ID, "", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), ErrMalformed)
			wantErr(t, s.Complete(delID(9), "", at), fs.ErrNotExist)
			wantErr(t, s.Fail(delID(9), "", at), fs.ErrNotExist)
			_, err = s.Revoke(delID(9), at)
			wantErr(t, err, fs.ErrNotExist)
			wantErr(t, s.Complete("del_x", "", at), ErrMalformed)
			if d, _ := s.Get(f.root.ID); d != f.root {
				t.Fatalf("refused changes changed the record: %+v", d)
			}
		})
	}
}

// The tree of the subtree tests, each delegation made by attenuating its
// parent's token:
//
//	R root→alice ─┬─ A alice→bob ─┬─ B bob→carol ── C carol→dave
//	              │               └─ D bob→dave
//	              └─ E alice→carol
func subtree(t *testing.T) map[string]Delegation {
	f := newFixture(t)
	aTok := f.aTok
	bTok := f.bTok
	cTok := mustAttenuate(t, bTok, carolKey, daveKey, delID(4))
	dTok := mustAttenuate(t, aTok, bobKey, daveKey, delID(5))
	eTok := mustAttenuate(t, f.rootTok, aliceKey, carolKey, delID(6))
	return map[string]Delegation{
		"R": f.root, "A": f.a, "B": f.b,
		"C": record(cTok, f.b.ID, carolKey.ID(), 3, 3),
		"D": record(dTok, f.a.ID, bobKey.ID(), 2, 4),
		"E": record(eTok, f.root.ID, aliceKey.ID(), 1, 5),
	}
}

func TestRevokeSubtree(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			ds := subtree(t)
			s := k.open(t)
			for _, n := range []string{"R", "A", "B", "C", "D", "E"} {
				mustInsert(t, s, ds[n])
			}
			// B completes while its child C is still at work.
			if err := s.Complete(ds["B"].ID, attID, t0.Add(10*time.Minute)); err != nil {
				t.Fatal(err)
			}
			changed, err := s.Revoke(ds["A"].ID, t0.Add(20*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{ds["A"].Key, ds["C"].Key, ds["D"].Key}; !slices.Equal(changed, want) {
				t.Fatalf("Revoke(A) changed %v; want %v (A, then C under the completed B, then D)", changed, want)
			}
			s = k.reopen(t, s)
			want := map[string]Status{"R": StatusActive, "A": StatusRevoked, "B": StatusCompleted, "C": StatusRevoked, "D": StatusRevoked, "E": StatusActive}
			for n, st := range want {
				d, err := s.Get(ds[n].ID)
				if err != nil {
					t.Fatal(err)
				}
				if d.Status != st {
					t.Errorf("%s is %s; want %s", n, d.Status, st)
				}
				if st == StatusRevoked && d.CompletedAt != ts(20) {
					t.Errorf("%s revoked at %q; want %s", n, d.CompletedAt, ts(20))
				}
				if n == "B" && (d.CompletedAt != ts(10) || d.AttestationID != attID) {
					t.Errorf("B lost its completion: %+v", d)
				}
			}
			// Revoked is final, and nothing may be delegated under it.
			_, err = s.Revoke(ds["A"].ID, t0.Add(30*time.Minute))
			wantErr(t, err, ErrTerminal)
			_, err = s.Revoke(ds["C"].ID, t0.Add(30*time.Minute))
			wantErr(t, err, ErrTerminal)
			dTok, err := dct.ParseSerialized(ds["D"].DCT)
			if err != nil {
				t.Fatal(err)
			}
			under := mustAttenuate(t, dTok, daveKey, carolKey, delID(7))
			wantErr(t, s.Insert(record(under, ds["D"].ID, daveKey.ID(), 3, 31)), ErrParentInactive)
			// Revoking the root takes what is left.
			changed, err = s.Revoke(ds["R"].ID, t0.Add(40*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{ds["R"].Key, ds["E"].Key}; !slices.Equal(changed, want) {
				t.Fatalf("Revoke(R) changed %v; want %v", changed, want)
			}
		})
	}
}

// The revocation walks through ended delegations to reach the active
// delegations under them; a check that stopped at the first ended one would
// leave C active.
func TestRevokeReachesBelowEnded(t *testing.T) {
	ds := subtree(t)
	s := NewMemory()
	for _, n := range []string{"R", "A", "B", "C"} {
		mustInsert(t, s, ds[n])
	}
	if err := s.Fail(ds["A"].ID, "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ds["B"].ID, "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	changed, err := s.Revoke(ds["R"].ID, t0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{ds["R"].Key, ds["C"].Key}; !slices.Equal(changed, want) {
		t.Fatalf("changed %v; want %v", changed, want)
	}
	for n, st := range map[string]Status{"A": StatusFailed, "B": StatusCompleted, "C": StatusRevoked} {
		if d, _ := s.Get(ds[n].ID); d.Status != st {
			t.Errorf("%s is %s; want %s", n, d.Status, st)
		}
	}
}
