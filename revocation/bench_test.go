package revocation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

var (
	benchOnce    sync.Once
	benchEntries []Entry // 100,001 entries by key 1, none naming a bench token's block
)

func benchmarkEntries(b *testing.B, n int) []Entry {
	benchOnce.Do(func() {
		k := testKey(b, 1)
		benchEntries = make([]Entry, 100_001)
		var wg sync.WaitGroup
		for w := range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for i := w; i < len(benchEntries); i += runtime.GOMAXPROCS(0) {
					e, err := NewEntry(k, testID(fmt.Sprint("bench ", i)), Scope([]Scope{ScopeBlock, ScopeChain}[i%2]), testTime)
					if err != nil {
						panic(err)
					}
					benchEntries[i] = e
				}
			})
		}
		wg.Wait()
	})
	return benchEntries[:n]
}

// benchToken is a token of n blocks, block i signed by key i+1.
func benchToken(b *testing.B, n int) (blockIDs, signers []string) {
	for i := range n {
		blockIDs = append(blockIDs, testID(fmt.Sprint("block ", i)))
		signers = append(signers, testKey(b, byte(i+1)).ID())
	}
	return blockIDs, signers
}

// The common case: the token is not revoked.
func BenchmarkListRevoked(b *testing.B) {
	for _, entries := range []int{0, 100, 10_000} {
		l := testList(b, benchmarkEntries(b, entries)...)
		for _, blocks := range []int{1, 9} {
			ids, signers := benchToken(b, blocks)
			b.Run(fmt.Sprintf("entries=%d/blocks=%d", entries, blocks), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, revoked, err := l.Revoked(ids, signers); revoked || err != nil {
						b.Fatal(revoked, err)
					}
				}
			})
		}
	}
}

// Every block of a 9-block token has entries that are not honoured (made
// by a stranger, or by the signer of the next block): the most work
// Revoked does for a token that is not revoked.
func BenchmarkListRevokedIgnoredEntries(b *testing.B) {
	ids, signers := benchToken(b, 9)
	l := testList(b, benchmarkEntries(b, 10_000)...)
	stranger := testKey(b, 99)
	for i, id := range ids {
		l.Add(testEntry(b, stranger, id, ScopeChain))
		if i < len(ids)-1 {
			l.Add(testEntry(b, testKey(b, byte(i+2)), id, ScopeBlock))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, revoked, err := l.Revoked(ids, signers); revoked || err != nil {
			b.Fatal(revoked, err)
		}
	}
}

func BenchmarkListRevokedParallel(b *testing.B) {
	ids, signers := benchToken(b, 9)
	l := testList(b, benchmarkEntries(b, 10_000)...)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Revoked(ids, signers)
		}
	})
}

// benchFile writes a list file of the given entries, unverified.
func benchFile(b *testing.B, path string, entries []Entry) {
	l := NewList()
	for _, e := range entries {
		l.add(e)
	}
	data, err := l.fileBytes()
	if err != nil {
		b.Fatal(err)
	}
	if err := writeFileAtomic(path, data, listFileMode); err != nil {
		b.Fatal(err)
	}
}

// openSettled opens a list file and waits until its stamp can be trusted,
// so that the File no longer compares its content on every call.
func openSettled(b *testing.B, path string) *File {
	f, err := OpenFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	for f.current().racy {
		time.Sleep(racyWindow)
	}
	return f
}

// A File of 100,000 entries, unchanged. Revoked is the decision: one
// stat, then the map lookups of List.Revoked. Reload is what a File pays
// on every decision while the file's stamp cannot be trusted (it changed
// less than racyWindow before it was read): the file read and hashed, not
// parsed.
func BenchmarkFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "list.json")
	benchFile(b, path, benchmarkEntries(b, 100_000))
	f := openSettled(b, path)
	for _, blocks := range []int{1, 9} {
		ids, signers := benchToken(b, blocks)
		b.Run(fmt.Sprintf("Revoked/entries=100000/blocks=%d", blocks), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, revoked, err := f.Revoked(ids, signers); revoked || err != nil {
					b.Fatal(revoked, err)
				}
			}
		})
	}
	b.Run("RevokedParallel/entries=100000/blocks=9", func(b *testing.B) {
		ids, signers := benchToken(b, 9)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				f.Revoked(ids, signers)
			}
		})
	})
	b.Run("ReloadUnchanged/entries=100000", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := f.Reload(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The first decision after Append added one entry to a list of 100,000:
// the file is read and hashed, and only the new entry parsed and verified.
// The appends (signing, writing) are not timed.
func BenchmarkFileRevokedAfterAppend(b *testing.B) {
	path := filepath.Join(b.TempDir(), "list.json")
	benchFile(b, path, benchmarkEntries(b, 100_000))
	f := openSettled(b, path)
	ids, signers := benchToken(b, 1)
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	head := bytes.TrimRight(data, jsonSpace)
	head = head[:len(head)-1]
	k := testKey(b, 2)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		e := testEntry(b, k, testID(fmt.Sprint("appended ", i)), ScopeChain)
		head = bytes.TrimRight(head, jsonSpace)
		head = append(head, ",\n  "...)
		head = append(head, must(json.Marshal(e))...)
		if err := writeFileAtomic(path, append(head, "\n]\n"...), listFileMode); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, revoked, err := f.Revoked(ids, signers); revoked || err != nil {
			b.Fatal(revoked, err)
		}
	}
	if n := f.List().Len(); n <= 100_000 {
		b.Fatalf("the list has %d entries", n)
	}
}

// The first decision after the list of 100,000 entries was rewritten
// otherwise (here: one entry taken out, then put back): the whole file is
// parsed, but no entry verified again.
func BenchmarkFileRevokedAfterRewrite(b *testing.B) {
	entries := benchmarkEntries(b, 100_000)
	path := filepath.Join(b.TempDir(), "list.json")
	benchFile(b, path, entries)
	f := openSettled(b, path)
	ids, signers := benchToken(b, 1)
	dir := b.TempDir()
	versions := []string{filepath.Join(dir, "without"), filepath.Join(dir, "with")}
	benchFile(b, versions[0], entries[1:])
	benchFile(b, versions[1], entries)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		// A hard link replaces the list as Append's rename does, without
		// writing it again.
		if err := os.Link(versions[i%2], path+".new"); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, revoked, err := f.Revoked(ids, signers); revoked || err != nil {
			b.Fatal(revoked, err)
		}
	}
}

func BenchmarkParseList(b *testing.B) {
	data, err := testList(b, benchmarkEntries(b, 10_000)...).fileBytes()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ParseList(data); err != nil {
			b.Fatal(err)
		}
	}
}

// Append to a 10,000-entry list: every entry of the list is verified
// before it is extended.
func BenchmarkAppend(b *testing.B) {
	path := filepath.Join(b.TempDir(), "list.json")
	benchFile(b, path, benchmarkEntries(b, 10_000))
	k := testKey(b, 2)
	i := 0
	for b.Loop() {
		i++
		if err := Append(path, testEntry(b, k, testID(fmt.Sprint("append ", i)), ScopeChain)); err != nil {
			b.Fatal(err)
		}
	}
}
