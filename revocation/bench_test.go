package revocation

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

var (
	benchOnce    sync.Once
	benchEntries []Entry // 10,000 entries by key 1, none naming a bench token's block
)

func benchmarkEntries(b *testing.B, n int) []Entry {
	benchOnce.Do(func() {
		k := testKey(b, 1)
		benchEntries = make([]Entry, 10_000)
		for i := range benchEntries {
			benchEntries[i] = testEntry(b, k, testID(fmt.Sprint("bench ", i)), Scope([]Scope{ScopeBlock, ScopeChain}[i%2]))
		}
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
// by a stranger, or block-scoped on a non-last block): the most work
// Revoked does for a token that is not revoked.
func BenchmarkListRevokedIgnoredEntries(b *testing.B) {
	ids, signers := benchToken(b, 9)
	l := testList(b, benchmarkEntries(b, 10_000)...)
	stranger, root := testKey(b, 99), testKey(b, 1)
	for i, id := range ids {
		l.Add(testEntry(b, stranger, id, ScopeChain))
		if i < len(ids)-1 {
			l.Add(testEntry(b, root, id, ScopeBlock))
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

func benchFile(b *testing.B, entries []Entry) string {
	path := filepath.Join(b.TempDir(), "list.json")
	data, err := testList(b, entries...).fileBytes()
	if err != nil {
		b.Fatal(err)
	}
	if err := writeFileAtomic(path, data, listFileMode); err != nil {
		b.Fatal(err)
	}
	return path
}

func BenchmarkFileRevoked(b *testing.B) {
	path := benchFile(b, benchmarkEntries(b, 10_000))
	for _, blocks := range []int{1, 9} {
		ids, signers := benchToken(b, blocks)
		b.Run(fmt.Sprintf("entries=10000/blocks=%d", blocks), func(b *testing.B) {
			f, err := OpenFile(path, FileOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, revoked, err := f.Revoked(ids, signers); revoked || err != nil {
					b.Fatal(revoked, err)
				}
			}
		})
	}
}

// Reload of a 10,000-entry list whose entries are already verified, next
// to ParseList, which verifies every signature.
func BenchmarkReload(b *testing.B) {
	path := benchFile(b, benchmarkEntries(b, 10_000))
	f, err := OpenFile(path, FileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := f.Reload(); err != nil {
			b.Fatal(err)
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
	path := benchFile(b, benchmarkEntries(b, 10_000))
	k := testKey(b, 2)
	i := 0
	for b.Loop() {
		i++
		if err := Append(path, testEntry(b, k, testID(fmt.Sprint("append ", i)), ScopeChain)); err != nil {
			b.Fatal(err)
		}
	}
}
