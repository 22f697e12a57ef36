//go:build unix

package budget

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO where the store should be (swapped in by someone who can write
// its directory) is refused at once: opening it does not wait for a
// writer.
func TestReadUsageFIFO(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ReadUsage(path)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
			t.Errorf("a FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadUsage of a FIFO blocked")
	}
}
