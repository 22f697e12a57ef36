package revocation

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

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
