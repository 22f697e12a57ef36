package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, data := range []string{"first", "second, longer", ""} {
		if err := WriteFileAtomic(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestWriteFileAtomicMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "f")
	if err := WriteFileAtomic(path, []byte("x"), 0o600); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want ErrNotExist", err)
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := TryLock(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryLock(path, 0o600); !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryLock: %v, want ErrLocked", err)
	}
	unlock()
	unlock2, err := TryLock(path, 0o600)
	if err != nil {
		t.Fatalf("TryLock after unlock: %v", err)
	}
	unlock2()
}

func TestLockWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := Lock(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error)
	go func() {
		unlock2, err := Lock(path, 0o600)
		if err == nil {
			unlock2()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second Lock returned while the first was held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// A directory whose path holds glob metacharacters is taken as written.
func TestGlobInDirWithMetacharacters(t *testing.T) {
	for _, name := range []string{"st[1]", "a*b", "q?", `back\slash`, "plain"} {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"store-1.live.a", "store-1.live.b", "store-1.seen.json", "other"} {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, err := GlobIn(dir, "store-1.live.*")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{filepath.Join(dir, "store-1.live.a"), filepath.Join(dir, "store-1.live.b")}
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("GlobIn(%q) = %q, want %q", dir, got, want)
		}
	}
	if got, err := GlobIn(filepath.Join(t.TempDir(), "none"), "*"); err != nil || got != nil {
		t.Errorf("GlobIn of a missing directory = %q, %v; want none, no error", got, err)
	}
	if _, err := GlobIn(t.TempDir(), "["); err == nil {
		t.Error("GlobIn with a malformed pattern: no error")
	}
}
