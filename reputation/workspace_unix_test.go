//go:build unix

package reputation

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO in the workspace would block a reader forever; it is refused
// without being opened.
func TestFIFORefused(t *testing.T) {
	w := testWorkspace(t)
	writeWS(t, w, "contracts/.keep", "")
	if err := syscall.Mkfifo(filepath.Join(w.Dir(), ContractsDir, "pipe.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Contract("pipe"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("%v", err)
	}
}
