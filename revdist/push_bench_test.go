package revdist

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/delegateos/delegateos/revocation"
)

// bigList writes a list file of n entries by one revoker and opens it.
func bigList(b *testing.B, n int) (string, *revocation.File) {
	b.Helper()
	k := testKey(b, 7)
	l := revocation.NewList()
	for i := range n {
		if err := l.Add(testEntry(b, k, fmt.Sprint("block-", i))); err != nil {
			b.Fatal(err)
		}
	}
	data, err := l.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "revocations.json")
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := revocation.OpenFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return path, f
}

// BenchmarkPushToBigList is the cost of storing one pushed entry in a list
// of 50,000, as FileStore.Add stores it ("append": only the entry is
// verified and written, in place, then synced) and as it did before
// ("rewrite": the whole list copied, re-read, every entry verified again,
// and the file rewritten and synced, then re-read). Each op stores one new
// entry.
func BenchmarkPushToBigList(b *testing.B) {
	const n = 50_000
	k := testKey(b, 8)
	var next int
	fresh := func() revocation.Entry {
		next++
		return testEntry(b, k, fmt.Sprint("pushed-", next))
	}
	b.Run("rewrite", func(b *testing.B) {
		path, f := bigList(b, n)
		for b.Loop() {
			b.StopTimer()
			e := fresh()
			b.StartTimer()
			if holds(f.List(), e) {
				b.Fatal("held before it was added")
			}
			if err := revocation.Append(path, e); err != nil {
				b.Fatal(err)
			}
			if err := f.Reload(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		path, f := bigList(b, n)
		s := &FileStore{Path: path, File: f}
		for b.Loop() {
			b.StopTimer()
			e := fresh()
			b.StartTimer()
			if added, err := s.Add(e); err != nil || !added {
				b.Fatal(added, err)
			}
		}
	})
}

// BenchmarkTenPushesAtOnce is ten pushes to a list of 50,000 entries made
// at once, as FileStore.Add stores them: each op is the ten.
func BenchmarkTenPushesAtOnce(b *testing.B) {
	k := testKey(b, 9)
	path, f := bigList(b, 50_000)
	s := &FileStore{Path: path, File: f}
	var next int
	for b.Loop() {
		b.StopTimer()
		var es []revocation.Entry
		for range 10 {
			next++
			es = append(es, testEntry(b, k, fmt.Sprint("ten-", next)))
		}
		b.StartTimer()
		var wg sync.WaitGroup
		for _, e := range es {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if added, err := s.Add(e); err != nil || !added {
					b.Error(added, err)
				}
			}()
		}
		wg.Wait()
	}
}
