package revocation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// fileFixture is a list file holding one entry, and a one-block token.
type fileFixture struct {
	path    string
	root    Entry // revokes blocks[0] of the token, scope chain
	blocks  []string
	signers []string
}

func newFileFixture(t *testing.T) fileFixture {
	k := testKey(t, 1)
	fx := fileFixture{
		path:    filepath.Join(t.TempDir(), "list.json"),
		blocks:  []string{testID("token")},
		signers: []string{k.ID()},
	}
	fx.root = testEntry(t, k, fx.blocks[0], ScopeChain)
	if err := Append(fx.path, testEntry(t, k, testID("unrelated"), ScopeChain)); err != nil {
		t.Fatal(err)
	}
	return fx
}

// state returns "revoked", "valid" or the error.
func (fx fileFixture) state(f *File) string {
	_, revoked, err := f.Revoked(fx.blocks, fx.signers)
	switch {
	case err != nil:
		return err.Error()
	case revoked:
		return "revoked"
	}
	return "valid"
}

// eventually polls f for up to five seconds until its state is want (""
// for any error) and returns the last state.
func (fx fileFixture) eventually(f *File, want string) string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := fx.state(f)
		done := s == want || want == "" && s != "valid" && s != "revoked"
		if done || time.Now().After(deadline) {
			return s
		}
		time.Sleep(time.Millisecond)
	}
}

func TestOpenFileMissing(t *testing.T) {
	_, err := OpenFile(filepath.Join(t.TempDir(), "missing.json"), FileOptions{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want fs.ErrNotExist", err)
	}
}

func TestFileSeesAppendOnEveryCall(t *testing.T) {
	fx := newFileFixture(t)
	f, err := OpenFile(fx.path, FileOptions{CheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "valid" {
		t.Fatalf("before: %s", s)
	}
	if err := Append(fx.path, fx.root); err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "revoked" {
		t.Fatalf("after Append: %s", s)
	}
	if f.List().Len() != 2 || f.Err() != nil {
		t.Errorf("List has %d entries, Err %v", f.List().Len(), f.Err())
	}
}

func TestFileChecksAtMostOncePerInterval(t *testing.T) {
	fx := newFileFixture(t)
	f, err := OpenFile(fx.path, FileOptions{CheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := Append(fx.path, fx.root); err != nil {
		t.Fatal(err)
	}
	// A look would happen in the background: give it time.
	for range 5 {
		if s := fx.state(f); s != "valid" {
			t.Fatalf("within the interval the file was looked at: %s", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "revoked" {
		t.Fatalf("after Reload: %s", s)
	}
}

func TestFileSeesAppendAfterInterval(t *testing.T) {
	for _, interval := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(fmt.Sprint(interval), func(t *testing.T) {
			fx := newFileFixture(t)
			f, err := OpenFile(fx.path, FileOptions{CheckInterval: interval})
			if err != nil {
				t.Fatal(err)
			}
			if err := Append(fx.path, fx.root); err != nil {
				t.Fatal(err)
			}
			wait := interval
			if wait == 0 {
				wait = DefaultCheckInterval
			}
			time.Sleep(wait)
			if s := fx.eventually(f, "revoked"); s != "revoked" {
				t.Fatalf("after Append: %s", s)
			}
		})
	}
}

func TestFileFailsClosed(t *testing.T) {
	fx := newFileFixture(t)
	good, err := os.ReadFile(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(fx.path, FileOptions{CheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	tampered := testEntry(t, testKey(t, 1), testID("x"), ScopeBlock)
	tampered.Scope = ScopeChain
	steps := []struct {
		name   string
		do     func() error
		want   string // "valid", "revoked" or "error"
		wantIs error
	}{
		{"deleted", func() error { return os.Remove(fx.path) }, "error", fs.ErrNotExist},
		{"recreated", func() error { return os.WriteFile(fx.path, good, 0o644) }, "valid", nil},
		{"truncated in place", func() error { return os.WriteFile(fx.path, good[:len(good)/2], 0o644) }, "error", ErrMalformedList},
		{"still bad", func() error { return nil }, "error", ErrMalformedList},
		{"fixed in place", func() error { return os.WriteFile(fx.path, good, 0o644) }, "valid", nil},
		{"bad signature", func() error { return writeFileAtomic(fx.path, must(marshalEntries([]Entry{tampered}, true)), 0o644) }, "error", ErrInvalidSignature},
		{"replaced", func() error { return writeFileAtomic(fx.path, good, 0o644) }, "valid", nil},
		{"replaced by a directory", func() error {
			if err := os.Remove(fx.path); err != nil {
				return err
			}
			return os.Mkdir(fx.path, 0o755)
		}, "error", nil},
		{"directory removed, revocation appended", func() error {
			if err := os.Remove(fx.path); err != nil {
				return err
			}
			return Append(fx.path, fx.root)
		}, "revoked", nil},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		_, revoked, err := f.Revoked(fx.blocks, fx.signers)
		got := map[bool]string{false: "valid", true: "revoked"}[revoked]
		if err != nil {
			got = "error"
		}
		if got != s.want {
			t.Fatalf("%s: got %s (%v), want %s", s.name, got, err, s.want)
		}
		if s.wantIs != nil && !errors.Is(err, s.wantIs) {
			t.Errorf("%s: %v does not wrap %v", s.name, err, s.wantIs)
		}
		if !errors.Is(f.Err(), err) {
			t.Errorf("%s: Err() = %v, Revoked's error %v", s.name, f.Err(), err)
		}
		if got == "error" && f.List().Len() == 0 {
			t.Errorf("%s: List lost the last good list", s.name)
		}
	}
}

func TestFileErrorWithIntervalUntilFixed(t *testing.T) {
	fx := newFileFixture(t)
	f, err := OpenFile(fx.path, FileOptions{CheckInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(fx.path); err != nil {
		t.Fatal(err)
	}
	fx.eventually(f, "")
	for range 3 {
		if _, _, err := f.Revoked(fx.blocks, fx.signers); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("deleted file: %v", err)
		}
	}
	if err := Append(fx.path, fx.root); err != nil {
		t.Fatal(err)
	}
	if s := fx.eventually(f, "revoked"); s != "revoked" {
		t.Fatalf("recreated file: %s", s)
	}
}

// A reload does not verify again the entries the current list holds, and
// an entry counts as held only if every field, not just its signature, is
// the same.
func TestReloadReusesVerifiedEntries(t *testing.T) {
	k := testKey(t, 1)
	e := testEntry(t, k, testID("a"), ScopeBlock)
	// Pretend a forged entry had been verified, to see that it is not
	// verified again.
	forged := e
	forged.RevocationID = testID("forged")
	known := NewList()
	known.add(e)
	known.add(forged)
	l, err := parseList(must(marshalEntries([]Entry{e, forged}, true)), known)
	if err != nil || l.Len() != 2 {
		t.Fatalf("known entries were verified again: %v", err)
	}
	escalated := e
	escalated.Scope = ScopeChain
	if _, err := parseList(must(marshalEntries([]Entry{e, escalated}, true)), known); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("an entry differing from a known one only in scope was not verified: %v", err)
	}
}

func TestFileListIsASnapshot(t *testing.T) {
	fx := newFileFixture(t)
	f, err := OpenFile(fx.path, FileOptions{CheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.List().Add(fx.root); err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "valid" {
		t.Fatalf("changing List() changed the File: %s", s)
	}
}

func TestFileConcurrent(t *testing.T) {
	for _, interval := range []time.Duration{-1, time.Millisecond} {
		t.Run(fmt.Sprint(interval), func(t *testing.T) {
			fx := newFileFixture(t)
			f, err := OpenFile(fx.path, FileOptions{CheckInterval: interval})
			if err != nil {
				t.Fatal(err)
			}
			entries := concurrentEntries(t, 0, 20)
			stop := make(chan struct{})
			var readers sync.WaitGroup
			for range 4 {
				readers.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if _, _, err := f.Revoked(fx.blocks, fx.signers); err != nil {
							t.Error(err)
							return
						}
						f.List()
					}
				})
			}
			var writers sync.WaitGroup
			for w := range 2 {
				writers.Go(func() {
					for i := w; i < len(entries); i += 2 {
						if err := Append(fx.path, entries[i]); err != nil {
							t.Error(err)
						}
					}
				})
			}
			writers.Wait()
			close(stop)
			readers.Wait()
			if err := f.Reload(); err != nil {
				t.Fatal(err)
			}
			got := f.List().Entries()
			for _, e := range entries {
				if !slices.Contains(got, e) {
					t.Errorf("missing %s", e.RevocationID)
				}
			}
		})
	}
}

func TestNilFile(t *testing.T) {
	var f *File
	if _, _, err := f.Revoked([]string{testID("a")}, []string{"x"}); err == nil {
		t.Error("nil File: want error")
	}
}
