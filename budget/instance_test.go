package budget

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A state directory lists every instance it ran as: the same one once
// however many proxies open it, a copy of it (another directory) another
// that keeps the list it was copied with, and a list that is not one
// delegateos writes refuses the start.
func TestMachineInstance(t *testing.T) {
	dir := t.TempDir()
	tok, seen, _, err := machineInstance(dir, "m1")
	if _, ok := seen[tok]; err != nil || len(tok) != 24 || !ok || len(seen) != 1 {
		t.Fatalf("first instance: %q %v %v", tok, seen, err)
	}
	again, seen, _, err := machineInstance(dir, "m1")
	if err != nil || again != tok || len(seen) != 1 {
		t.Fatalf("the same directory again: %q %v %v; want %q, one instance", again, seen, err, tok)
	}
	b, _ := os.ReadFile(filepath.Join(dir, instancesFile))
	copied := t.TempDir()
	if err := os.WriteFile(filepath.Join(copied, instancesFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	other, seen, _, err := machineInstance(copied, "m1")
	if err != nil || other == tok || seen[tok] != 0 || seen[other] != 1 || len(seen) != 2 {
		t.Fatalf("a copy: %q %v %v; want a new instance, ranked after %q, which it ran as before", other, seen, err, tok)
	}
	if err := os.WriteFile(filepath.Join(dir, instancesFile), []byte("not a token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := machineInstance(dir, "m1"); err == nil || !strings.Contains(err.Error(), "is not a list of machine instances") {
		t.Fatalf("a corrupt list: %v; want refused", err)
	}
	// The list deleted while a counts file names the instances that
	// raised its keys: refused, not begun again.
	os.Remove(filepath.Join(dir, instancesFile))
	if err := os.WriteFile(filepath.Join(dir, "store-0011223344556677.seen.json"), []byte(`{"id":"i","gen":1,"machine":"m1","minst":{"k":"`+tok+`"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := machineInstance(dir, "m1"); err == nil || !strings.Contains(err.Error(), "is gone (deleted)") {
		t.Fatalf("the list deleted under counts naming its instances: %v; want refused", err)
	}
}

// Each instance is listed with the mark of its boot and its directory's
// path; a list of an earlier version (tokens alone) is read, its
// instances without a mark; the same path in this boot has one mark,
// another path (a copy beside it) another.
func TestMachineInstanceMarks(t *testing.T) {
	dir := t.TempDir()
	old := strings.Repeat("ab", 12)
	if err := os.WriteFile(filepath.Join(dir, instancesFile), []byte(old+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, rank, marks, err := machineInstance(dir, "m1")
	if err != nil || rank[old] != 0 || rank[tok] != 1 || marks[old] != "" || marks[tok] != placeMark(dir) {
		t.Fatalf("%q %v %v %v; want the earlier instance unmarked, this one marked %q", tok, rank, marks, err, placeMark(dir))
	}
	if bootID()[:5] == "boot:" && (placeMark(dir) == "" || placeMark(dir) != placeMark(dir+"/") || placeMark(dir) == placeMark(t.TempDir())) {
		t.Fatalf("marks: %q %q", placeMark(dir), placeMark(dir+"/"))
	}
	b, _ := os.ReadFile(filepath.Join(dir, instancesFile))
	if want := old + "\n" + tok + " " + placeMark(dir) + "\n"; string(b) != want && placeMark(dir) != "" {
		t.Fatalf("the list: %q; want %q", b, want)
	}
	// Read again without adding: the same.
	rank2, marks2, err := readInstances(dir, "", "")
	if err != nil || len(rank2) != 2 || marks2[tok] != marks[tok] {
		t.Fatalf("read again: %v %v %v", rank2, marks2, err)
	}
	if err := os.WriteFile(filepath.Join(dir, instancesFile), []byte(tok+" not-a-mark\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readInstances(dir, "", ""); err == nil {
		t.Fatal("a line with a mark that is not one was read")
	}
}
