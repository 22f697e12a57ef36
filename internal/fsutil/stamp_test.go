package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func stamp(t *testing.T, p *StatPath) Stamp {
	t.Helper()
	var s Stamp
	if err := p.Stat(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Every kind of change to the file at a path changes its stamp, and a
// stamp taken through the path equals the one of the open file.
func TestStampSeesChanges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := NewStatPath(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	held, err := StampOf(f)
	if err != nil {
		t.Fatal(err)
	}
	if s := stamp(t, p); !s.Same(held) || !s.Regular() || s.Size() != 5 {
		t.Fatalf("the path's stamp %+v differs from the open file's %+v", s, held)
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"written in place, longer", func() error { return os.WriteFile(path, []byte("second"), 0o644) }},
		{"replaced by a rename, same size", func() error { return WriteFileAtomic(path, []byte("third!"), 0o644) }},
		{"mode changed", func() error { return os.Chmod(path, 0o600) }},
		{"replaced again, same size and mode", func() error { return WriteFileAtomic(path, []byte("fourth"), 0o600) }},
	}
	last := stamp(t, p)
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatal(err)
		}
		s := stamp(t, p)
		if s.Same(last) {
			t.Errorf("%s: the stamp did not change", st.name)
		}
		last = s
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	var s Stamp
	if err := p.Stat(&s); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a removed file: %v, want fs.ErrNotExist", err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if s := stamp(t, p); s.Regular() {
		t.Error("a directory's stamp says it is a regular file")
	}
}

// A file replaced while another is open keeps a different inode: the one
// held cannot be reused.
func TestStampHeldFileNotReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := WriteFileAtomic(path, []byte("same"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	held, err := StampOf(f)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := NewStatPath(path)
	for range 50 {
		if err := WriteFileAtomic(path, []byte("same"), 0o644); err != nil {
			t.Fatal(err)
		}
		if stamp(t, p).Same(held) {
			t.Fatal("a replaced file has the stamp of the file held open")
		}
	}
}

func TestStampChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	before := time.Now().Add(-time.Second)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := NewStatPath(path)
	if c := stamp(t, p).Changed(); c.Before(before) || c.After(time.Now().Add(time.Second)) {
		t.Errorf("Changed = %v, now %v", c, time.Now())
	}
}

func TestNewStatPathNUL(t *testing.T) {
	if _, err := NewStatPath("a\x00b"); !errors.Is(err, ErrNULInPath) {
		t.Errorf("got %v", err)
	}
}

func BenchmarkStatPath(b *testing.B) {
	path := filepath.Join(b.TempDir(), "revocations.json")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	p, _ := NewStatPath(path)
	var s Stamp
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Stat(&s); err != nil {
			b.Fatal(err)
		}
	}
}
