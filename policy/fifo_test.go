//go:build linux

package policy

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A policy file or a lock file swapped for a FIFO (with a writer that
// never writes, so a read would wait for ever) is refused at once as not
// a regular file: a reload reading it would block, and the end of the
// process waits for the reload.
func TestLoadRefusesFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load of a FIFO: %v", err)
	}
	if _, _, err := LoadWithDigest(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("LoadWithDigest of a FIFO: %v", err)
	}
	if _, err := LoadPins(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("LoadPins of a FIFO: %v", err)
	}
}
