package jsonlines

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// A log is held by one open lock, under every name of it; it is read
// whole, keeping its mode, and rewritten in place, ready for appending.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spend.log")
	data, mode, err := ReadFile("spend store", path, 0o600)
	if data != nil || mode != 0o600 || err != nil {
		t.Fatalf("a missing log: %q, %o, %v", data, mode, err)
	}
	if err := os.WriteFile(path, []byte("a\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	resolved, unlock, err := Lock(link, 0o600)
	if err != nil || resolved != path {
		t.Fatalf("Lock through a link: %q, %v", resolved, err)
	}
	defer unlock()
	if again, _, err := Lock(path, 0o600); !errors.Is(err, fsutil.ErrLocked) || again != path {
		t.Fatalf("a second Lock: %q, %v; want ErrLocked", again, err)
	}
	data, mode, err = ReadFile("spend store", resolved, 0o600)
	if string(data) != "a\n" || mode != 0o640 || err != nil {
		t.Fatalf("the log: %q, %o, %v", data, mode, err)
	}
	log, err := Rewrite(nil, path, []byte("b\n"), mode)
	if err != nil || log == nil {
		t.Fatalf("Rewrite: %v", err)
	}
	if _, err := log.Write([]byte("c\n")); err != nil {
		t.Fatal(err)
	}
	log, err = Rewrite(log, path, []byte("d\n"), mode)
	if err != nil {
		t.Fatal(err)
	}
	log.Close()
	if b, _ := os.ReadFile(path); string(b) != "d\n" {
		t.Fatalf("after the rewrites: %q", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Fatalf("the rewrite's mode: %o", fi.Mode().Perm())
	}
	if _, _, err := ReadFile("spend store", dir, 0o600); err == nil || !strings.Contains(err.Error(), "spend store "+dir+" is not a regular file") {
		t.Fatalf("a directory: %v", err)
	}
}
