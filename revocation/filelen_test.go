package revocation

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFileLen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.json")
	if err := os.WriteFile(path, []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := f.Len(); n != 0 {
		t.Fatalf("Len %d", n)
	}
	for i, id := range []string{"a", "b"} {
		if err := Append(path, testEntry(t, testKey(t, 1), testID(id), ScopeChain)); err != nil {
			t.Fatal(err)
		}
		if n := f.Len(); n != i+1 {
			t.Fatalf("after %d appends, Len %d", i+1, n)
		}
	}
}
