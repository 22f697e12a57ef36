package revocation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

func TestOpenFileMissing(t *testing.T) {
	_, err := OpenFile(filepath.Join(t.TempDir(), "missing.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want fs.ErrNotExist", err)
	}
}

func openFile(t *testing.T, path string) *File {
	t.Helper()
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A change is decided on by the very next call after the write returns:
// appends, a rewrite in place, a replacement with fewer entries.
func TestFileSeesEveryChangeAtNextCall(t *testing.T) {
	fx := newFileFixture(t)
	f := openFile(t, fx.path)
	if s := fx.state(f); s != "valid" {
		t.Fatalf("before: %s", s)
	}
	unrevoked, err := os.ReadFile(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	k := testKey(t, 1)
	for i := range 20 {
		if err := Append(fx.path, testEntry(t, k, testID(fmt.Sprint("more ", i)), ScopeChain)); err != nil {
			t.Fatal(err)
		}
		if s := fx.state(f); s != "valid" {
			t.Fatalf("after unrelated append %d: %s", i, s)
		}
	}
	if err := Append(fx.path, fx.root); err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "revoked" {
		t.Fatalf("the call after Append returned: %s", s)
	}
	if f.List().Len() != 22 || f.Err() != nil {
		t.Errorf("List has %d entries, Err %v", f.List().Len(), f.Err())
	}
	if err := os.WriteFile(fx.path, unrevoked, 0o644); err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "valid" {
		t.Fatalf("the call after the list was rewritten without the entry: %s", s)
	}
	if err := writeFileAtomic(fx.path, must(testList(t, fx.root).fileBytes()), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "revoked" {
		t.Fatalf("the call after the list was replaced: %s", s)
	}
}

// countReads counts the times f reads its file.
func countReads(f *File) *atomic.Int64 {
	n := new(atomic.Int64)
	f.duringRead = func() { n.Add(1) }
	return n
}

// An unchanged file is not read again once its stamp can be trusted; while
// it changed too recently for that, every call compares its content.
func TestFileRereadsOnlyWhenChangedOrRacy(t *testing.T) {
	fx := newFileFixture(t)
	f := openFile(t, fx.path)
	reads := countReads(f)
	// Now is when the file changed: the stamp cannot be trusted yet.
	changed := f.state.Load().stamp.Changed()
	f.now = func() time.Time { return changed }
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		fx.state(f)
	}
	if n := reads.Load(); n != 4 {
		t.Errorf("a racy file was read %d times by Reload and 3 calls; want 4", n)
	}
	// Now is long after: one more read settles it, then none.
	f.now = func() time.Time { return changed.Add(time.Hour) }
	for range 5 {
		fx.state(f)
	}
	if n := reads.Load(); n != 5 {
		t.Errorf("read %d times in all; want 5", n)
	}
	if err := Append(fx.path, fx.root); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if s := fx.state(f); s != "revoked" {
			t.Fatalf("after Append: %s", s)
		}
	}
	if n := reads.Load(); n != 6 {
		t.Errorf("read %d times in all; want 6 (once more for the Append)", n)
	}
}

// A rewrite in place that keeps the size and restores the modification
// time, right after the file was read: nothing in the stamp need change,
// so the content is compared.
func TestFileSeesSameSizeRewriteInPlace(t *testing.T) {
	fx := newFileFixture(t)
	f := openFile(t, fx.path)
	fi, err := os.Stat(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	revoking := must(testList(t, fx.root).fileBytes())
	if int64(len(revoking)) != fi.Size() {
		t.Fatalf("the rewrite is %d bytes, the file %d", len(revoking), fi.Size())
	}
	out, err := os.OpenFile(fx.path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.WriteAt(revoking, 0); err != nil {
		t.Fatal(err)
	}
	out.Close()
	if err := os.Chtimes(fx.path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "revoked" {
		t.Fatalf("after a same-size rewrite in place: %s", s)
	}
}

// A list replaced twice in a row by files of the same size, with the same
// modification time, while nothing is decided in between: the file held
// open keeps its inode, so each replacement is seen.
func TestFileSeesReplacementsOfSameSizeAndTime(t *testing.T) {
	fx := newFileFixture(t)
	f := openFile(t, fx.path)
	fi, err := os.Stat(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	unrelated := must(os.ReadFile(fx.path))
	revoking := must(testList(t, fx.root).fileBytes())
	f.now = func() time.Time { return time.Now().Add(time.Hour) } // never racy
	for i, data := range [][]byte{revoking, unrelated, revoking, unrelated} {
		for range 2 {
			if err := writeFileAtomic(fx.path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(fx.path, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}
		want := map[bool]string{true: "revoked", false: "valid"}[i%2 == 0]
		if s := fx.state(f); s != want {
			t.Fatalf("replacement %d: %s, want %s", i, s, want)
		}
	}
}

// A revocation written while the File is reading the list for an earlier
// change: that read answers the call that started it, and the next call
// reads again.
func TestFileChangeDuringReload(t *testing.T) {
	for _, how := range []string{"replaced", "rewritten in place"} {
		t.Run(how, func(t *testing.T) {
			fx := newFileFixture(t)
			f := openFile(t, fx.path)
			k := testKey(t, 1)
			if err := Append(fx.path, testEntry(t, k, testID("earlier"), ScopeChain)); err != nil {
				t.Fatal(err)
			}
			f.duringRead = func() {
				f.duringRead = nil
				var err error
				if how == "replaced" {
					err = Append(fx.path, fx.root)
				} else {
					err = os.WriteFile(fx.path, must(testList(t, fx.root).fileBytes()), 0o644)
				}
				if err != nil {
					t.Error(err)
				}
			}
			f.now = func() time.Time { return time.Now().Add(time.Hour) } // never racy
			fx.state(f)
			if s := fx.state(f); s != "revoked" {
				t.Fatalf("the call after the revocation was written: %s", s)
			}
		})
	}
}

// A deleted list denies every call; a new list at its path is read at the
// next call.
func TestFileDeletedAndRecreated(t *testing.T) {
	fx := newFileFixture(t)
	f := openFile(t, fx.path)
	good := must(os.ReadFile(fx.path))
	if err := os.Remove(fx.path); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := f.Revoked(fx.blocks, fx.signers); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("deleted file: %v", err)
		}
	}
	if err := Append(fx.path, fx.root); err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "revoked" {
		t.Fatalf("recreated with the revocation: %s", s)
	}
	if err := os.Remove(fx.path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fx.path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "valid" {
		t.Fatalf("recreated without it: %s", s)
	}
}

func TestFileClose(t *testing.T) {
	fx := newFileFixture(t)
	f := openFile(t, fx.path)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Revoked(fx.blocks, fx.signers); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Revoked after Close: %v", err)
	}
	if err := f.Reload(); err == nil {
		t.Fatal("Reload after Close: no error")
	}
}

func TestFileFailsClosed(t *testing.T) {
	fx := newFileFixture(t)
	good, err := os.ReadFile(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	f := openFile(t, fx.path)
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
		if fe := f.Err(); fe != err && (fe == nil || err == nil || fe.Error() != err.Error()) {
			t.Errorf("%s: Err() = %v, Revoked's error %v", s.name, f.Err(), err)
		}
		if got == "error" && f.List().Len() == 0 {
			t.Errorf("%s: List lost the last good list", s.name)
		}
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
	f := openFile(t, fx.path)
	if err := f.List().Add(fx.root); err != nil {
		t.Fatal(err)
	}
	if s := fx.state(f); s != "valid" {
		t.Fatalf("changing List() changed the File: %s", s)
	}
}

func TestFileConcurrent(t *testing.T) {
	for _, racy := range []bool{false, true} {
		t.Run(fmt.Sprint("racy=", racy), func(t *testing.T) {
			fx := newFileFixture(t)
			f := openFile(t, fx.path)
			if racy {
				f.now = func() time.Time { return time.Unix(0, 0) }
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

// The decision on an unchanged file: one stat, no allocation (where the
// stat needs none, see fsutil.StatPath).
func TestFileRevokedDoesNotAllocate(t *testing.T) {
	fx := newFileFixture(t)
	f := openFile(t, fx.path)
	f.now = func() time.Time { return time.Now().Add(time.Hour) } // never racy
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { f.Revoked(fx.blocks, fx.signers) }); n != 0 && statDoesNotAllocate {
		t.Errorf("%v allocations", n)
	}
}

// Entries appended after the last one are read alone; anything else that
// changed is read in full, and a bad appended entry fails closed like any
// other.
func TestFileAppendedEntries(t *testing.T) {
	k := testKey(t, 1)
	unrelated := testEntry(t, k, testID("unrelated"), ScopeChain)
	extra := testEntry(t, k, testID("extra"), ScopeChain)
	fx := newFileFixture(t)
	tampered := testEntry(t, k, testID("tampered"), ScopeBlock)
	tampered.Scope = ScopeChain
	listOf := func(es ...Entry) []byte { return must(marshalEntries(es, true)) }
	// withTail is the file of es with tail written before its bracket.
	withTail := func(tail string, es ...Entry) []byte {
		b := listOf(es...)
		b = bytes.TrimRight(b, jsonSpace)
		return append(append(b[:len(b)-1:len(b)-1], tail...), "]\n"...)
	}
	obj := func(e Entry) string { return string(must(json.Marshal(e))) }
	steps := []struct {
		name   string
		data   []byte
		want   string
		wantIs error
	}{
		{"appended, unrelated", listOf(unrelated, extra), "valid", nil},
		{"appended, revoking", listOf(unrelated, extra, fx.root), "revoked", nil},
		{"appended, repeated", withTail(",\n  "+obj(fx.root)+",\n  "+obj(extra)+"\n", unrelated, extra, fx.root), "revoked", nil},
		{"entry taken out, as long as the head", listOf(extra, unrelated, extra), "valid", nil},
		{"appended, bad signature", withTail(",\n  "+obj(tampered)+"\n", extra, unrelated, extra), "error", ErrInvalidSignature},
		{"fixed", listOf(extra, unrelated, extra), "valid", nil},
		{"appended nothing but a comma", withTail(",\n", extra, unrelated, extra), "error", ErrMalformedList},
		{"fixed again", listOf(extra, unrelated, extra), "valid", nil},
		{"appended without a comma", withTail("\n  "+obj(fx.root)+"\n", extra, unrelated, extra), "error", ErrMalformedList},
		{"appended after garbage", withTail(",\n  "+obj(fx.root)+"\n] [", extra, unrelated, extra), "error", ErrMalformedList},
		{"emptied", listOf(), "valid", nil},
		{"an entry in the empty list", withTail(obj(fx.root)), "revoked", nil},
		{"the head rewritten, same length", listOf(fx.root, unrelated), "revoked", nil},
		{"the revoking entry swapped out, same length", listOf(unrelated, fx.root), "revoked", nil},
		{"and out", listOf(unrelated, extra), "valid", nil},
	}
	f := openFile(t, fx.path)
	f.now = func() time.Time { return time.Now().Add(time.Hour) } // never racy
	for _, st := range steps {
		if err := writeFileAtomic(fx.path, st.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, revoked, err := f.Revoked(fx.blocks, fx.signers)
		got := map[bool]string{false: "valid", true: "revoked"}[revoked]
		if err != nil {
			got = "error"
		}
		if got != st.want || st.wantIs != nil && !errors.Is(err, st.wantIs) {
			t.Fatalf("%s: got %s (%v), want %s", st.name, got, err, st.want)
		}
		if got != "error" {
			want, err := ParseList(st.data)
			if err != nil {
				t.Fatal(err)
			}
			if g := f.List().Entries(); !slices.Equal(g, want.Entries()) {
				t.Errorf("%s: the File holds %d entries, the file %d", st.name, len(g), want.Len())
			}
		}
	}
}
