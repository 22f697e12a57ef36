//go:build unix

package identity

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLoadKeyFileFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := LoadKeyFile(path)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("FIFO: err = %v, want not a regular file", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the reader so the goroutine ends with the test.
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("LoadKeyFile blocked opening a FIFO")
	}
}

func TestLoadKeyFileDevice(t *testing.T) {
	if _, err := os.Stat(os.DevNull); err != nil {
		t.Fatalf("no %s: %v", os.DevNull, err)
	}
	_, err := LoadKeyFile(os.DevNull)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("%s: err = %v, want not a regular file", os.DevNull, err)
	}
}
