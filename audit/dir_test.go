package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// Each opener of a directory of logs gets a log of its own; a closed log
// is continued by the next opener, and one that cannot be continued is
// skipped and left as it is.
func TestOpenDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit") + "/"
	if !IsDir(dir) || IsDir(filepath.Clean(dir)) {
		t.Fatal("IsDir")
	}
	s := testSigner(t, 1)
	a, skipped, err := OpenDir(dir, s, Options{})
	if err != nil || len(skipped) > 0 {
		t.Fatal(err, skipped)
	}
	b, _, err := OpenDir(dir, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Path() == b.Path() {
		t.Fatalf("two openers share %s", a.Path())
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	c, _, err := OpenDir(dir, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Path() != a.Path() {
		t.Fatalf("the closed log %s is not continued: %s", a.Path(), c.Path())
	}
	c.Close()
	b.Close()
	// Cut the first log in the middle of an entry.
	f, err := os.OpenFile(a.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"torn":`)
	f.Close()
	d, skipped, err := OpenDir(dir, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(skipped) != 1 || d.Path() == a.Path() {
		t.Fatalf("the torn log: skipped %v, opened %s", skipped, d.Path())
	}
	logs, err := DirLogs(dir)
	if err != nil || len(logs) != 2 || logs[0] != a.Path() {
		t.Fatalf("DirLogs: %v, %v", logs, err)
	}
}
