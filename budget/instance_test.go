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
	tok, seen, err := machineInstance(dir, "m1")
	if _, ok := seen[tok]; err != nil || len(tok) != 24 || !ok || len(seen) != 1 {
		t.Fatalf("first instance: %q %v %v", tok, seen, err)
	}
	again, seen, err := machineInstance(dir, "m1")
	if err != nil || again != tok || len(seen) != 1 {
		t.Fatalf("the same directory again: %q %v %v; want %q, one instance", again, seen, err, tok)
	}
	b, _ := os.ReadFile(filepath.Join(dir, instancesFile))
	copied := t.TempDir()
	if err := os.WriteFile(filepath.Join(copied, instancesFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	other, seen, err := machineInstance(copied, "m1")
	if err != nil || other == tok || seen[tok] != 0 || seen[other] != 1 || len(seen) != 2 {
		t.Fatalf("a copy: %q %v %v; want a new instance, ranked after %q, which it ran as before", other, seen, err, tok)
	}
	if err := os.WriteFile(filepath.Join(dir, instancesFile), []byte("not a token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := machineInstance(dir, "m1"); err == nil || !strings.Contains(err.Error(), "is not a list of machine instances") {
		t.Fatalf("a corrupt list: %v; want refused", err)
	}
	// The list deleted while a counts file names the instances that
	// raised its keys: refused, not begun again.
	os.Remove(filepath.Join(dir, instancesFile))
	if err := os.WriteFile(filepath.Join(dir, "store-0011223344556677.seen.json"), []byte(`{"id":"i","gen":1,"machine":"m1","minst":{"k":"`+tok+`"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := machineInstance(dir, "m1"); err == nil || !strings.Contains(err.Error(), "is gone (deleted)") {
		t.Fatalf("the list deleted under counts naming its instances: %v; want refused", err)
	}
}
