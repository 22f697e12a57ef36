package upstreamuser

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A token file others can read is a warning (without an upstream user);
// one readable by its owner only, or one that is missing, says nothing.
func TestCheckTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	if w, err := CheckTokenFile(path, nil); err != nil || len(w) != 0 {
		t.Errorf("mode 0600: %q, %v", w, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if w, err := CheckTokenFile(path, nil); err != nil || len(w) != 1 || !strings.Contains(w[0], "readable by group or others (mode 0644)") {
		t.Errorf("mode 0644: %q, %v", w, err)
	}
	if w, err := CheckTokenFile(filepath.Join(dir, "missing"), nil); err != nil || len(w) != 0 {
		t.Errorf("missing: %q, %v", w, err)
	}
}
