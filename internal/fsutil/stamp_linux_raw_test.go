//go:build linux && (amd64 || arm64)

package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStatPathDoesNotAllocate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a file name long enough not to fit in a small buffer.json")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := NewStatPath(path)
	var s Stamp
	if n := testing.AllocsPerRun(100, func() { _ = p.Stat(&s) }); n != 0 {
		t.Errorf("Stat: %v allocations", n)
	}
}
