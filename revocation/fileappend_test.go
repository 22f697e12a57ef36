package revocation

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// newListFile writes a list of es and opens it.
func newListFile(t *testing.T, es ...Entry) (string, *File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "revocations.json")
	if err := os.WriteFile(path, must(marshalEntries(es, true)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, openFile(t, path)
}

// fileEntries reads and verifies the file at path as a new reader would.
func fileEntries(t *testing.T, path string) []Entry {
	t.Helper()
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return l.Entries()
}

// File.Append writes the entry after the others, verified, in the
// package's file format; the File and a new reader both see it. A tampered
// entry is refused and the file left as it was; an entry the list holds
// already, or another by the same revoker for the same block, adds
// nothing.
func TestFileAppend(t *testing.T) {
	k := testKey(t, 1)
	a, b := testEntry(t, k, testID("a"), ScopeChain), testEntry(t, k, testID("b"), ScopeBlock)
	path, f := newListFile(t, a)
	if added, err := f.Append(b); err != nil || !added {
		t.Fatalf("append: %v %v", added, err)
	}
	want := []Entry{a, b}
	if got := fileEntries(t, path); !slices.Equal(got, want) {
		t.Fatalf("the file holds %v", got)
	}
	if got := f.List().Entries(); !slices.Equal(got, want) {
		t.Fatalf("the File holds %v", got)
	}
	if data, _ := os.ReadFile(path); !bytes.Equal(data, must(marshalEntries(want, true))) {
		t.Fatalf("the file is not in the list format:\n%s", data)
	}
	before, _ := os.ReadFile(path)

	tampered := testEntry(t, k, testID("c"), ScopeBlock)
	tampered.Scope = ScopeChain
	if added, err := f.Append(tampered); !errors.Is(err, ErrInvalidSignature) || added {
		t.Fatalf("a tampered entry: %v %v", added, err)
	}
	if again, err := NewEntry(k, b.RevocationID, ScopeChain, testTime.AddDate(1, 0, 0)); err != nil {
		t.Fatal(err)
	} else if added, err := f.Append(again); err != nil || added {
		t.Fatalf("another entry by the same revoker for the same block: %v %v", added, err)
	}
	if added, err := f.Append(b); err != nil || added {
		t.Fatalf("the same entry again: %v %v", added, err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatalf("refused and repeated entries changed the file:\n%s", after)
	}
}

// An entry appended to an empty list, and to a list another process
// appended to meanwhile (with the package's Append), lands after what is
// there.
func TestFileAppendAfterOtherWriters(t *testing.T) {
	k := testKey(t, 1)
	a, b, c := testEntry(t, k, testID("a"), ScopeChain), testEntry(t, k, testID("b"), ScopeChain), testEntry(t, k, testID("c"), ScopeChain)
	path, f := newListFile(t)
	if added, err := f.Append(a); err != nil || !added {
		t.Fatalf("append to the empty list: %v %v", added, err)
	}
	if err := Append(path, b); err != nil {
		t.Fatal(err)
	}
	if added, err := f.Append(c); err != nil || !added {
		t.Fatalf("append after another writer: %v %v", added, err)
	}
	if got := fileEntries(t, path); !slices.Equal(got, []Entry{a, b, c}) {
		t.Fatalf("the file holds %v", got)
	}
}

// Appends from many goroutines through two Files (two processes, as far
// as the file is concerned) and the package's Append all land, each once,
// and the file stays a valid list.
func TestFileAppendConcurrent(t *testing.T) {
	k := testKey(t, 1)
	path, f1 := newListFile(t, testEntry(t, k, testID("first"), ScopeChain))
	f2 := openFile(t, path)
	var entries []Entry
	for i := range 24 {
		entries = append(entries, testEntry(t, k, testID(fmt.Sprint("e", i)), ScopeChain))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(entries))
	for i, e := range entries {
		wg.Add(2) // each entry twice: one of the two adds it
		for j := range 2 {
			go func() {
				defer wg.Done()
				var err error
				switch (i + j) % 3 {
				case 0:
					_, err = f1.Append(e)
				case 1:
					_, err = f2.Append(e)
				default:
					err = Append(path, e)
				}
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := fileEntries(t, path)
	if len(got) != 1+len(entries) {
		t.Fatalf("the file holds %d entries, want %d", len(got), 1+len(entries))
	}
	for _, e := range entries {
		if !slices.Contains(got, e) {
			t.Fatalf("entry %s is missing", e.RevocationID)
		}
	}
	for _, f := range []*File{f1, f2} {
		if g := f.List().Entries(); !slices.Equal(g, got) {
			t.Fatalf("a File holds %d entries, in another order than the file", len(g))
		}
	}
}

// An append interrupted between writing the entry and syncing it (a crash)
// leaves a record; the next writer puts back what the record says the
// append replaced, unless the file holds the append whole, and appends.
func TestFileAppendRecoversInterruptedAppend(t *testing.T) {
	k := testKey(t, 1)
	a, b, c := testEntry(t, k, testID("a"), ScopeChain), testEntry(t, k, testID("b"), ScopeChain), testEntry(t, k, testID("c"), ScopeChain)
	for _, torn := range []bool{true, false} {
		t.Run(map[bool]string{true: "torn", false: "whole"}[torn], func(t *testing.T) {
			path, f := newListFile(t, a)
			before, _ := os.ReadFile(path)
			head := listHead(before)
			full := must(marshalEntries([]Entry{a, b}, true))
			after := full
			if torn {
				after = full[:len(full)-20] // the crash cut the write short
			}
			rec := testRecord(t, path, head, before)
			if err := os.WriteFile(path+".append", []byte(rec), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, after, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(path); torn && err == nil {
				t.Fatal("the torn list reads")
			}
			if err := Append(path, c); err != nil {
				t.Fatal(err)
			}
			want := []Entry{a, c}
			if !torn {
				want = []Entry{a, b, c}
			}
			if got := fileEntries(t, path); !slices.Equal(got, want) {
				t.Fatalf("the file holds %v, want %v", got, want)
			}
			if rec, _ := os.ReadFile(path + ".append"); len(rec) != 0 {
				t.Fatalf("the record is left: %q", rec)
			}
			if got := f.List().Entries(); !slices.Equal(got, want) {
				t.Fatalf("the File holds %v", got)
			}
		})
	}
}

// A server that starts after a crash cut an append short reads the list as
// it was before the append.
func TestOpenFileUndoesInterruptedAppend(t *testing.T) {
	k := testKey(t, 1)
	a, b := testEntry(t, k, testID("a"), ScopeChain), testEntry(t, k, testID("b"), ScopeChain)
	path := filepath.Join(t.TempDir(), "revocations.json")
	before := must(marshalEntries([]Entry{a}, true))
	head := listHead(before)
	full := must(marshalEntries([]Entry{a, b}, true))
	if err := os.WriteFile(path, full[:len(full)-20], 0o644); err != nil {
		t.Fatal(err)
	}
	rec := testRecord(t, path, head, before)
	if err := os.WriteFile(path+".append", []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	f := openFile(t, path)
	if got := f.List().Entries(); !slices.Equal(got, []Entry{a}) {
		t.Fatalf("the File holds %v", got)
	}
	if data, _ := os.ReadFile(path); !bytes.Equal(data, before) {
		t.Fatalf("the list file is\n%s", data)
	}
}

// A record that is not one stops every writer, naming it, rather than be
// guessed at.
func TestFileAppendRefusesUnknownRecord(t *testing.T) {
	k := testKey(t, 1)
	path, f := newListFile(t, testEntry(t, k, testID("a"), ScopeChain))
	if err := os.WriteFile(path+".append", []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Append(testEntry(t, k, testID("b"), ScopeChain)); err == nil || !strings.Contains(err.Error(), ".append") {
		t.Fatalf("%v", err)
	}
}

// File.Append does not verify the entries the File has read already: its
// cost is the entry's. (A forged entry the File was made to believe in is
// not checked again.)
func TestFileAppendVerifiesOnlyTheNewEntry(t *testing.T) {
	k := testKey(t, 1)
	a := testEntry(t, k, testID("a"), ScopeChain)
	path, f := newListFile(t, a)
	forged := a
	forged.RevocationID = testID("forged")
	// The File believes forged verified, as if it had read it.
	if err := os.WriteFile(path, must(marshalEntries([]Entry{a, forged}, true)), 0o644); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.state.Load().list.add(forged)
	f.mu.Unlock()
	if added, err := f.Append(testEntry(t, k, testID("b"), ScopeChain)); err != nil || !added {
		t.Fatalf("%v %v: the entries already read were verified again", added, err)
	}
}

// testRecord is the record appendInPlace writes before appending at head
// to the list file at path holding before.
func testRecord(t *testing.T, path string, head int, before []byte) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(before[:head])
	return formatRecord(int64(head), int64(len(before)), fi, sum[:], before[head:])
}
