package chain

import (
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/dct"
)

// benchChildren are n children of the race root, alice → bob.
func benchChildren(b *testing.B, n int) (Delegation, []Delegation) {
	rootTok, root := raceRoot()
	ds := make([]Delegation, n)
	for i := range ds {
		tok, err := dct.Attenuate(rootTok, dct.AttenuateParams{Attenuator: aliceKey, Delegatee: bobKey.ID(), DelegationID: delID(0x1000 + i), Now: t0})
		if err != nil {
			b.Fatal(err)
		}
		ds[i] = record(tok, root.ID, aliceKey.ID(), 1, 1)
	}
	return root, ds
}

// An insert: lock, catch up, check (two token parses), append, fsync.
func BenchmarkFileInsert(b *testing.B) {
	root, ds := benchChildren(b, b.N)
	s := mustOpen(b, filepath.Join(b.TempDir(), "chain.log"))
	mustInsert(b, s, root)
	b.ResetTimer()
	for i := range b.N {
		if err := s.Insert(ds[i]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryInsert(b *testing.B) {
	root, ds := benchChildren(b, b.N)
	s := NewMemory()
	mustInsert(b, s, root)
	b.ResetTimer()
	for i := range b.N {
		if err := s.Insert(ds[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// Opening a log of 1000 delegations replays and checks every line.
func BenchmarkLoad1000(b *testing.B) {
	root, ds := benchChildren(b, 999)
	path := filepath.Join(b.TempDir(), "chain.log")
	s := mustOpen(b, path)
	mustInsert(b, s, root)
	mustInsert(b, s, ds...)
	s.Close()
	b.ResetTimer()
	for range b.N {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}

// A List on an open File with nothing new: lock, stat, no replay.
func BenchmarkFileListUnchanged(b *testing.B) {
	root, ds := benchChildren(b, 99)
	s := mustOpen(b, filepath.Join(b.TempDir(), "chain.log"))
	mustInsert(b, s, root)
	mustInsert(b, s, ds...)
	b.ResetTimer()
	for range b.N {
		if _, err := s.List(); err != nil {
			b.Fatal(err)
		}
	}
}
