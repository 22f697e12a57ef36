package chain

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/redistest"
)

// sybil is a second tree from the same root whose IDs repeat the
// fixture's: root issued evil a token with alice's root delegation ID, and
// evil attenuated it to dave under the ID of alice's delegation to bob.
// Anyone holding a token from a root can choose any ID.
type sybil struct {
	rootTok, aTok *dct.Token
	root, a       Delegation
}

func newSybil(tb testing.TB) sybil {
	tb.Helper()
	var s sybil
	p := rootParams(3)
	p.Delegatee = evilKey.ID()
	s.rootTok = mustCreate(tb, p)
	s.aTok = mustAttenuate(tb, s.rootTok, evilKey, daveKey, delID(2))
	s.root = record(s.rootTok, dct.RootParentDelegationID, rootKey.ID(), 0, 5)
	s.a = record(s.aTok, s.root.ID, evilKey.ID(), 1, 6)
	return s
}

// Two delegations that share an ID are two delegations: recording,
// completing or revoking one leaves the other as it was, and the victim
// can still record hers after the sybil's.
func TestIDCollisionIsHarmless(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			f, sy := newFixture(t), newSybil(t)
			s := k.open(t)
			mustInsert(t, s, f.root, sy.root, sy.a, f.a)
			if f.a.ID != sy.a.ID || f.a.Key == sy.a.Key || f.root.Key == sy.root.Key {
				t.Fatalf("the fixture does not collide as meant: %s %s / %s %s", f.a.ID, f.a.Key, sy.a.ID, sy.a.Key)
			}
			if err := s.Complete(sy.a.Key, attID, t0.Add(10*time.Minute)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Revoke(sy.root.Key, t0.Add(11*time.Minute)); err != nil {
				t.Fatal(err)
			}
			s = k.reopen(t, s)
			r := s.(StatusReader)
			for _, d := range []Delegation{f.root, f.a} {
				if st, rec, err := r.Status(d.Key); err != nil || !rec || st != StatusActive {
					t.Errorf("victim %s (%s) is %q %v %v after the sybil's ended; want active", d.ID, d.Key, st, rec, err)
				}
			}
			if st, _, _ := r.Status(sy.a.Key); st != StatusCompleted {
				t.Errorf("the sybil's delegation is %q; want completed", st)
			}
			// The victim's tree goes on.
			mustInsert(t, s, f.b)
			if err := s.Complete(f.a.Key, "", t0.Add(12*time.Minute)); err != nil {
				t.Fatal(err)
			}
			// An ID names both: a lookup by it is ambiguous, never a guess.
			if _, err := s.Get(f.a.ID); !errors.Is(err, ErrAmbiguous) {
				t.Errorf("Get(%s) = %v; want ErrAmbiguous", f.a.ID, err)
			}
			if err := s.Fail(f.root.ID, "", t0.Add(13*time.Minute)); !errors.Is(err, ErrAmbiguous) {
				t.Errorf("Fail(%s) = %v; want ErrAmbiguous", f.root.ID, err)
			}
			both, err := s.WithID(f.a.ID)
			if err != nil || len(both) != 2 || both[0].Key != sy.a.Key || both[1].Key != f.a.Key {
				t.Fatalf("WithID = %v, %v", both, err)
			}
			// Shown as two delegations, told apart by key.
			lines := Text(Tree(mustList(t, s)), nil)
			if len(lines) != 5 {
				t.Fatalf("Text shows %d lines; want 5:\n%s", len(lines), strings.Join(lines, "\n"))
			}
			n := 0
			for _, l := range lines {
				if strings.Contains(l, f.a.ID) {
					n++
					if !strings.Contains(l, "key "+ShortKey(f.a.Key)) && !strings.Contains(l, "key "+ShortKey(sy.a.Key)) {
						t.Errorf("a line of a shared ID shows no key: %s", l)
					}
				}
			}
			if n != 2 {
				t.Errorf("%d lines show %s; want 2", n, f.a.ID)
			}
		})
	}
}

// The same delegation recorded twice is a duplicate; a record naming a key
// that is not its token's is refused.
func TestInsertKeys(t *testing.T) {
	f := newFixture(t)
	s := NewMemory()
	mustInsert(t, s, f.root)
	wantErr(t, s.Insert(f.root), ErrDuplicate)
	bad := f.a
	bad.Key = f.root.Key
	wantErr(t, s.Insert(bad), ErrTokenMismatch)
	bad = f.a
	bad.ParentKey = f.a.Key
	wantErr(t, s.Insert(bad), ErrTokenMismatch)
	unkeyed := f.a
	unkeyed.Key, unkeyed.ParentKey = "", ""
	mustInsert(t, s, unkeyed)
	if d, err := s.Get(f.a.Key); err != nil || d.Key != f.a.Key || d.ParentKey != f.root.Key {
		t.Fatalf("Get by key = %+v, %v", d, err)
	}
}

// A log written before keys (status lines naming an ID only) is read, each
// line ending the one delegation that had the ID.
func TestFileReadsLogsWithoutKeys(t *testing.T) {
	f := newFixture(t)
	path := t.TempDir() + "/chain.log"
	var log []byte
	for _, d := range []Delegation{f.root, f.a} {
		d.Key, d.ParentKey = "", ""
		line, err := encodeEvent(&event{Op: opInsert, Delegation: &d})
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, line...)
	}
	log = append(log, `{"at":"2026-01-01T00:05:00.000Z","id":"del_000000000002","op":"complete"}`+"\n"...)
	if err := os.WriteFile(path, log, 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, path)
	if st, _, err := s.Status(f.a.Key); err != nil || st != StatusCompleted {
		t.Fatalf("Status = %q, %v; want completed", st, err)
	}
	if st, _, _ := s.Status(f.root.Key); st != StatusActive {
		t.Fatalf("root is %q", st)
	}
}

// A sybil's ending shared through Redis names her delegation's key, so no
// proxy of the fleet takes it for the victim's; an entry by ID, as a set
// written before keys holds, is still read (StatusByID) and ends every
// delegation with that ID.
func TestSharedIDCollision(t *testing.T) {
	srv := redistest.Start(t)
	f, sy := newFixture(t), newSybil(t)
	here, there := openShared(t, srv.URL()), openShared(t, srv.URL())
	mustInsert(t, here, sy.root, sy.a)
	mustInsert(t, there, f.root, f.a)
	if err := here.Complete(sy.a.Key, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := here.Revoke(sy.root.Key, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, there, sy.root.Key, StatusRevoked)
	waitStatus(t, there, sy.a.Key, StatusCompleted)
	for _, d := range []Delegation{f.root, f.a} {
		if st, _, err := there.Status(d.Key); err != nil || st != StatusActive {
			t.Errorf("victim %s is %q, %v; want active", d.ID, st, err)
		}
		if st, ended, err := there.StatusByID(d.ID); err != nil || ended {
			t.Errorf("StatusByID(%s) = %q %v %v; want nothing", d.ID, st, ended, err)
		}
	}
	set, err := LoadEnded(srv.URL())
	if err != nil || len(set) != 2 || set[sy.a.Key] != StatusCompleted || set[sy.root.Key] != StatusRevoked {
		t.Fatalf("LoadEnded = %v, %v", set, err)
	}
	// A legacy entry by ID.
	if err := srv.Client().HSet(context.Background(), endedHash, delID(7), string(StatusFailed)).Err(); err != nil {
		t.Fatal(err)
	}
	s3 := openShared(t, srv.URL())
	if st, ended, err := s3.StatusByID(delID(7)); err != nil || !ended || st != StatusFailed {
		t.Fatalf("StatusByID(legacy) = %q %v %v", st, ended, err)
	}
}

// A record that adds several blocks, one of which repeats its parent's ID,
// is a child of the recorded delegation its token continues.
func TestInsertSeveralBlocksRepeatingTheParentID(t *testing.T) {
	f := newFixture(t)
	s := NewMemory()
	mustInsert(t, s, f.root)
	tok := mustAttenuate(t, mustAttenuate(t, f.rootTok, aliceKey, bobKey, f.root.ID), bobKey, carolKey, delID(0x40))
	d := record(tok, f.root.ID, aliceKey.ID(), 1, 3)
	d.Key, d.ParentKey = "", ""
	mustInsert(t, s, d)
	got, err := s.Get(delID(0x40))
	if err != nil || got.ParentKey != f.root.Key {
		t.Fatalf("Get = %+v, %v; want the root as parent", got, err)
	}
	if roots := Tree(mustList(t, s)); len(roots) != 1 || len(roots[0].Children) != 1 {
		t.Fatalf("Tree: %d roots", len(roots))
	}
}
