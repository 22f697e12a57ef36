//go:build linux

package policy

import (
	"errors"
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

// LoadWhole refuses a file whose text does not end with a newline (a
// file cut while written in place), and reads a whole one as
// LoadWithDigest does.
func TestLoadWholeRefusesCutFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	whole := "roots: [\"did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK\"]\ndefault_cost: 100\n"
	if err := os.WriteFile(path, []byte(whole), 0o600); err != nil {
		t.Fatal(err)
	}
	p, d, err := LoadWhole(path)
	_, d2, _ := LoadWithDigest(path)
	if err != nil || p.DefaultCost != 100 || d != d2 {
		t.Fatalf("a whole file: %v %v %s %s", p, err, d, d2)
	}
	if err := os.WriteFile(path, []byte(strings.TrimSuffix(whole, "00\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadWhole(path); !errors.Is(err, ErrHalfWritten) {
		t.Fatalf("a cut file: %v", err)
	}
}
