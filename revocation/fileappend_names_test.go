package revocation

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A list file with a second name (a hard link, or a single file
// bind-mounted into a container, which pins the inode the same way): the
// proxy reads one name, the operator revokes through the other. Append
// replaces the name it was given with a new file, so the proxy's name keeps
// the old inode and the revocation is never in force there, although
// "delegateos revoke" returned successfully.
// Found by the second red team (was TestRedteam2AppendThroughSecondNameReachesReader).
func TestFileAppendThroughSecondNameReachesReader(t *testing.T) {
	fx := newFileFixture(t)
	other := filepath.Join(t.TempDir(), "mounted.json")
	if err := os.Link(fx.path, other); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	f := openFile(t, fx.path)
	if got := fx.state(f); got != "valid" {
		t.Fatalf("before the revocation: %s", got)
	}
	if err := Append(other, fx.root); err != nil {
		t.Fatal(err)
	}
	if got := fx.state(f); got != "revoked" {
		t.Errorf("after Append through the list's other name the token is %s; want revoked (or Append refusing a list with several names)", got)
	}
}

// Two revokers appending through the two names of one list take two
// different locks and each replaces only its own name: the names diverge
// and each loses the other's entries.
// Found by the second red team (was TestRedteam2AppendsThroughTwoNamesKeepEveryEntry).
func TestFileAppendsThroughTwoNamesKeepEveryEntry(t *testing.T) {
	fx := newFileFixture(t)
	other := filepath.Join(t.TempDir(), "mounted.json")
	if err := os.Link(fx.path, other); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	k := testKey(t, 1)
	a, b := testEntry(t, k, testID("a"), ScopeChain), testEntry(t, k, testID("b"), ScopeChain)
	if err := Append(fx.path, a); err != nil {
		t.Fatal(err)
	}
	if err := Append(other, b); err != nil {
		t.Fatal(err)
	}
	l, err := Load(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	if !l.IsRevoked(testID("a")) || !l.IsRevoked(testID("b")) {
		t.Errorf("the list at %s holds %d entries: a %v, b %v; want both appends", fx.path, l.Len(), l.IsRevoked(testID("a")), l.IsRevoked(testID("b")))
	}
}

// delegateos/revoke lets any principal that signed a block of a recorded
// delegation append entries, and an entry differs from the last by its
// revokedAt alone: one revoker re-revoking its own block with a new time on
// every request grows the list without bound (each Append rewrites the
// whole file), until it passes MaxListSize and every File reading it
// refuses every token. A second entry with the same revocation ID and
// revoker adds nothing a verifier uses.
// Found by the second red team (was TestRedteam2RepeatedRevocationDoesNotGrowTheList).
func TestFileAppendRepeatedRevocationDoesNotGrowTheList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.json")
	k := testKey(t, 1)
	id := testID("block")
	for i := range 50 {
		e, err := NewEntry(k, id, ScopeChain, testTime.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := Append(path, e); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 1 {
		t.Errorf("50 revocations of one block by one revoker left %d entries; want 1", l.Len())
	}
}

// Red team (rtnonce): the first push to an empty list (head 0) is written
// with writeFileAtomic (a rename) even when the list has several names
// (hard link; a single file bind-mounted into a container). The path
// Append rewrites such a list in place (rewriteInPlace); File.Append does
// not, so the other name keeps the old, empty list: a gate reading it
// never sees the pushed revocation (fail open), nor any later one.
func TestFileAppendEmptyListHardLink(t *testing.T) {
	k := testKey(t, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "revocations.json")
	if err := os.WriteFile(path, []byte("[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "mounted.json")
	if err := os.Link(path, other); err != nil {
		t.Fatal(err)
	}
	f := openFile(t, path)
	a := testEntry(t, k, testID("a"), ScopeChain)
	if added, err := f.Append(a); err != nil || !added {
		t.Fatalf("append: %v %v", added, err)
	}
	if got := fileEntries(t, other); !slices.Equal(got, []Entry{a}) {
		t.Fatalf("the list's other name holds %v after a push to the empty list; want the pushed entry", got)
	}
}
