package chain

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeLog builds a log at a new path with the fixture chain, a completion
// and a revocation, and returns its path and lines (with newlines).
func writeLog(t *testing.T) (string, [][]byte) {
	t.Helper()
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "chain.log")
	s := mustOpen(t, path)
	mustInsert(t, s, f.root, f.a, f.b)
	if err := s.Complete(f.b.ID, attID, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(f.a.ID, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if len(lines) != 5 {
		t.Fatalf("the log has %d lines; want 5", len(lines))
	}
	return path, lines
}

func TestFileFormat(t *testing.T) {
	path, lines := writeLog(t)
	if !bytes.HasPrefix(lines[0], []byte(`{"delegation":{"contractId":"ct_000000000001","createdAt":"2026-01-01T00:00:00.000Z","dct":{"format":"delegateos-sjt-v1","token":"`)) {
		t.Errorf("insert line: %s", lines[0])
	}
	f := newFixture(t)
	if want := `{"at":"2026-01-01T00:01:00.000Z","attestationId":"att_0123456789ab","id":"del_000000000003","key":"` + f.b.Key + `","op":"complete"}` + "\n"; string(lines[3]) != want {
		t.Errorf("complete line: %s", lines[3])
	}
	if want := `{"at":"2026-01-01T00:02:00.000Z","id":"del_000000000002","key":"` + f.a.Key + `","op":"revoke"}` + "\n"; string(lines[4]) != want {
		t.Errorf("revoke line: %s", lines[4])
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("log mode %v, %v; want 0600", fi.Mode(), err)
		}
	}
	ds, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Status{}
	for _, d := range ds {
		got[d.ID] = d.Status
	}
	want := map[string]Status{delID(1): StatusActive, delID(2): StatusRevoked, delID(3): StatusCompleted}
	if len(got) != 3 || got[delID(1)] != want[delID(1)] || got[delID(2)] != want[delID(2)] || got[delID(3)] != want[delID(3)] {
		t.Fatalf("Load: %v; want %v", got, want)
	}
}

func TestFileRestart(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "chain.log")
	s := mustOpen(t, path)
	mustInsert(t, s, f.root, f.a)
	s.Close()
	s = mustOpen(t, path)
	mustInsert(t, s, f.b) // the reopened store knows a, so b is a valid child
	if err := s.Complete(f.b.ID, "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, path)
	wantErr(t, s.Insert(f.b), ErrDuplicate)
	wantErr(t, s.Fail(f.b.ID, "", t0.Add(time.Minute)), ErrTerminal)
	if got := ids(mustList(t, s)); !slices.Equal(got, []string{delID(1), delID(2), delID(3)}) {
		t.Fatalf("after restarts: %v", got)
	}
}

func TestFileMissing(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "nope.log")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing log: %v; want fs.ErrNotExist", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("Load of a missing log created %v", entries)
	}
	if _, err := OpenFile(filepath.Join(dir, "no", "dir.log")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenFile in a missing directory: %v", err)
	}
	s := mustOpen(t, filepath.Join(dir, "new.log"))
	if n := len(mustList(t, s)); n != 0 {
		t.Fatalf("a new log holds %d records", n)
	}
	// A log deleted under an open store is an error, not a fresh start,
	// and not fs.ErrNotExist either, which Get returns for a delegation
	// that is not recorded.
	if err := os.Remove(filepath.Join(dir, "new.log")); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(newFixture(t).root); err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "disappeared") {
		t.Errorf("Insert into a deleted log: %v", err)
	}
	if _, err := s.Get(delID(1)); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get from a deleted log: %v; want an error that does not say the delegation is not recorded", err)
	}
}

func TestFileClosed(t *testing.T) {
	f := newFixture(t)
	s := mustOpen(t, filepath.Join(t.TempDir(), "chain.log"))
	mustInsert(t, s, f.root)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Insert(f.a); err == nil {
		t.Fatal("Insert after Close succeeded")
	}
	if _, err := s.List(); err == nil {
		t.Fatal("List after Close succeeded")
	}
	if _, err := s.Get(f.root.ID); err == nil {
		t.Fatal("Get after Close succeeded")
	}
}

// A crash during an append leaves a last line without its newline: it is
// not read, and the next writer cuts it off before appending.
func TestFileTornLastLine(t *testing.T) {
	for _, cut := range []int{1, 10, 200} {
		path, lines := writeLog(t)
		last := lines[4]
		torn := append(bytes.Join(lines[:4], nil), last[:min(cut, len(last)-1)]...)
		if err := os.WriteFile(path, torn, 0o600); err != nil {
			t.Fatal(err)
		}
		ds, err := Load(path)
		if err != nil {
			t.Fatalf("cut %d: Load: %v", cut, err)
		}
		if len(ds) != 3 || ds[1].Status != StatusActive {
			t.Fatalf("cut %d: the torn revocation took effect: %+v", cut, ds[1])
		}
		s := mustOpen(t, path)
		if _, err := s.Revoke(delID(1), t0.Add(3*time.Minute)); err != nil {
			t.Fatalf("cut %d: Revoke after a torn line: %v", cut, err)
		}
		s.Close()
		data, _ := os.ReadFile(path)
		want := string(bytes.Join(lines[:4], nil)) + `{"at":"2026-01-01T00:03:00.000Z","id":"del_000000000001","key":"` + newFixture(t).root.Key + `","op":"revoke"}` + "\n"
		if string(data) != want {
			t.Fatalf("cut %d: the torn line was not cut off:\n%s", cut, data)
		}
		if _, err := Load(path); err != nil {
			t.Fatal(err)
		}
	}
}

// A torn line longer than the line appended after it is cut off, not
// partly overwritten.
func TestFileTornLongLine(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "chain.log")
	s := mustOpen(t, path)
	mustInsert(t, s, f.root)
	s.Close()
	line, err := encodeEvent(&event{Op: opInsert, Delegation: &f.a})
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(line[:len(line)-1])
	w.Close()
	s = mustOpen(t, path)
	if _, err := s.Revoke(f.root.ID, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !bytes.HasSuffix(data, []byte(`{"at":"2026-01-01T00:01:00.000Z","id":"del_000000000001","key":"`+f.root.Key+`","op":"revoke"}`+"\n")) {
		t.Fatalf("the log does not end with the appended line: ...%q", data[max(0, len(data)-200):])
	}
	ds, err := Load(path)
	if err != nil {
		t.Fatalf("Load after appending past a long torn line: %v", err)
	}
	if len(ds) != 1 || ds[0].Status != StatusRevoked {
		t.Fatalf("Load: %+v", ds)
	}
}

// Any complete line that does not read or replay is an error naming it, and
// the log is left as it was, whether the store is opened after the damage or
// was already open.
func TestFileCorruptLine(t *testing.T) {
	f := newFixture(t)
	revokeUnknown := `{"at":"2026-01-01T00:02:00.000Z","id":"del_000000000009","op":"revoke"}` + "\n"
	completeAgain := `{"at":"2026-01-01T00:02:00.000Z","id":"del_000000000003","op":"complete"}` + "\n"
	badChild := func() string {
		d := f.b
		d.Depth = 5
		line, err := encodeEvent(&event{Op: opInsert, Delegation: &d})
		if err != nil {
			t.Fatal(err)
		}
		return string(line)
	}()
	cases := map[string]func(lines [][]byte) [][]byte{
		"flipped byte": func(l [][]byte) [][]byte {
			l[1] = bytes.Replace(l[1], []byte(`"depth":1`), []byte(`"depth":7`), 1)
			return l
		},
		"not canonical": func(l [][]byte) [][]byte { l[3] = bytes.Replace(l[3], []byte(`{"at"`), []byte(`{ "at"`), 1); return l },
		"member order": func(l [][]byte) [][]byte {
			l[4] = []byte(`{"id":"del_000000000002","at":"2026-01-01T00:02:00.000Z","op":"revoke"}` + "\n")
			return l
		},
		"unknown member": func(l [][]byte) [][]byte {
			l[4] = []byte(`{"at":"2026-01-01T00:02:00.000Z","id":"del_000000000002","op":"revoke","x":1}` + "\n")
			return l
		},
		"repeated member": func(l [][]byte) [][]byte {
			l[4] = []byte(`{"at":"2026-01-01T00:02:00.000Z","id":"del_000000000002","id":"del_000000000003","op":"revoke"}` + "\n")
			return l
		},
		"recased member": func(l [][]byte) [][]byte {
			l[4] = []byte(`{"At":"2026-01-01T00:02:00.000Z","id":"del_000000000002","op":"revoke"}` + "\n")
			return l
		},
		"null member": func(l [][]byte) [][]byte {
			l[4] = []byte(`{"at":"2026-01-01T00:02:00.000Z","delegation":null,"id":"del_000000000002","op":"revoke"}` + "\n")
			return l
		},
		"empty line":    func(l [][]byte) [][]byte { return slices.Insert(l, 2, []byte("\n")) },
		"not JSON":      func(l [][]byte) [][]byte { return slices.Insert(l, 2, []byte("hello\n")) },
		"invalid UTF-8": func(l [][]byte) [][]byte { l[3] = bytes.Replace(l[3], []byte("att_"), []byte("att\xff"), 1); return l },
		"unknown op": func(l [][]byte) [][]byte {
			l[4] = bytes.Replace(l[4], []byte(`"revoke"`), []byte(`"delete"`), 1)
			return l
		},
		"revoke unknown": func(l [][]byte) [][]byte { l[4] = []byte(revokeUnknown); return l },
		"ended twice":    func(l [][]byte) [][]byte { return slices.Insert(l, 4, []byte(completeAgain)) },
		"invariant":      func(l [][]byte) [][]byte { l[2] = []byte(badChild); return l },
		"duplicate":      func(l [][]byte) [][]byte { return slices.Insert(l, 2, l[1]) },
		"child first":    func(l [][]byte) [][]byte { l[1], l[2] = l[2], l[1]; return l },
		"status on insert": func(l [][]byte) [][]byte {
			l[0] = bytes.Replace(l[0], []byte(`"status":"active"`), []byte(`"status":"revoked"`), 1)
			return l
		},
		"insert with at": func(l [][]byte) [][]byte {
			l[1] = bytes.Replace(l[1], []byte(`{"delegation"`), []byte(`{"at":"2026-01-01T00:02:00.000Z","delegation"`), 1)
			return l
		},
		"insert with id": func(l [][]byte) [][]byte {
			l[1] = bytes.Replace(l[1], []byte(`,"op":"insert"}`), []byte(`,"id":"del_000000000002","op":"insert"}`), 1)
			return l
		},
		"insert without delegation": func(l [][]byte) [][]byte { return slices.Insert(l, 2, []byte(`{"op":"insert"}`+"\n")) },
		"revoke with delegation": func(l [][]byte) [][]byte {
			line, err := encodeEvent(&event{Op: opRevoke, Delegation: &f.a, ID: f.a.ID, At: ts(2)})
			if err != nil {
				t.Fatal(err)
			}
			l[4] = line
			return l
		},
		"revoke with attestation": func(l [][]byte) [][]byte {
			l[4] = []byte(`{"at":"2026-01-01T00:02:00.000Z","attestationId":"att_0123456789ab","id":"del_000000000002","op":"revoke"}` + "\n")
			return l
		},
		"status change without at": func(l [][]byte) [][]byte { l[4] = []byte(`{"id":"del_000000000002","op":"revoke"}` + "\n"); return l },
		"status change at garbage": func(l [][]byte) [][]byte {
			l[4] = []byte(`{"at":"yesterday","id":"del_000000000002","op":"revoke"}` + "\n")
			return l
		},
		"oversized line": func(l [][]byte) [][]byte {
			return slices.Insert(l, 2, append(bytes.Repeat([]byte("x"), MaxLineLen+1), '\n'))
		},
		"oversized torn": func(l [][]byte) [][]byte { return append(l, bytes.Repeat([]byte("x"), MaxLineLen+1)) },
		"carriage return": func(l [][]byte) [][]byte {
			l[4] = bytes.Replace(l[4], []byte("}\n"), []byte("}\r\n"), 1)
			return l
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			path, lines := writeLog(t)
			open := mustOpen(t, path) // opened before the damage
			bad := bytes.Join(damage(slices.Clone(lines)), nil)
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenFile(path); err == nil || !strings.Contains(err.Error(), "corrupt at line") {
				t.Fatalf("OpenFile of a damaged log: %v", err)
			}
			if _, err := Load(path); err == nil {
				t.Fatal("Load of a damaged log succeeded")
			}
			// The open store read all five lines; a damaged log is either
			// shorter or longer, or has changed within what it read. It
			// refuses to go on in the first two cases; the third it cannot
			// see without reading everything again, and does not claim to.
			if len(bad) != len(bytes.Join(lines, nil)) {
				if err := open.Insert(newFixture(t).b); err == nil {
					t.Fatal("an open store appended to a damaged log")
				}
			}
			if data, _ := os.ReadFile(path); !bytes.Equal(data, bad) {
				t.Fatal("the damaged log was changed")
			}
		})
	}
}

// Lines another writer appends that do not replay stop an open store.
func TestFileCorruptAppendedLine(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "chain.log")
	s := mustOpen(t, path)
	mustInsert(t, s, f.root)
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString(`{"at":"2026-01-01T00:02:00.000Z","id":"del_000000000009","op":"revoke"}` + "\n")
	w.Close()
	if _, err := s.List(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("List after a bad line was appended: %v", err)
	}
	if err := s.Insert(f.a); err == nil {
		t.Fatal("Insert after a bad line was appended succeeded")
	}
}

func TestFileShrunkOrReplaced(t *testing.T) {
	path, lines := writeLog(t)
	s := mustOpen(t, path)
	if err := os.WriteFile(path, bytes.Join(lines[:4], nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(); err == nil || !strings.Contains(err.Error(), "shrank") {
		t.Fatalf("List of a shrunk log: %v", err)
	}

	path, lines = writeLog(t)
	s = mustOpen(t, path)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(delID(1), t0.Add(time.Hour)); err == nil || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("Revoke on a replaced log: %v", err)
	}
}

func TestFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenFile(dir); err == nil {
		t.Fatal("OpenFile of a directory succeeded")
	}
}

// Two stores on one log each see what the other wrote before deciding.
func TestFileTwoStoresSeeEachOther(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "chain.log")
	one, two := mustOpen(t, path), mustOpen(t, path)
	mustInsert(t, one, f.root)
	mustInsert(t, two, f.a) // two sees the root one inserted
	if err := one.Complete(f.a.ID, "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, two.Insert(f.b), ErrParentInactive) // two sees the completion
	wantErr(t, one.Insert(f.a), ErrDuplicate)
	if d, err := two.Get(f.a.ID); err != nil || d.Status != StatusCompleted {
		t.Fatalf("two.Get: %+v, %v", d, err)
	}
}

// A symbolic link to the log shares its lock.
func TestFileSymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "chain.log")
	s := mustOpen(t, path)
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	l := mustOpen(t, link)
	if l.path != s.path {
		t.Fatalf("the link opened %s, the log is %s", l.path, s.path)
	}
}

// The line limit is checked before a line is parsed.
func TestDecodeLineLimit(t *testing.T) {
	line := []byte(`{"id":"` + strings.Repeat("a", MaxLineLen) + `","op":"revoke"}`)
	if _, err := decodeLine(line); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("decodeLine of a %d-byte line: %v", len(line), err)
	}
}

// An append whose sync fails is cut back and not applied: the caller is
// told nothing was recorded, and the log and the store agree.
func TestFileSyncFails(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "chain.log")
	s := mustOpen(t, path)
	mustInsert(t, s, f.root)
	before, _ := os.ReadFile(path)
	failure := errors.New("injected sync failure")
	s.syncLog = func(*os.File) error { return failure }
	wantErr(t, s.Insert(f.a), failure)
	if _, err := s.Revoke(f.root.ID, t0.Add(time.Minute)); !errors.Is(err, failure) {
		t.Fatalf("Revoke: %v", err)
	}
	s.syncLog = (*os.File).Sync
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatalf("a failed append was left in the log:\n%s", after)
	}
	if _, err := s.Get(f.a.ID); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed insert was applied: %v", err)
	}
	if d, _ := s.Get(f.root.ID); d.Status != StatusActive {
		t.Fatalf("a failed revoke was applied: %+v", d)
	}
	mustInsert(t, s, f.a)
	if got := ids(mustList(t, mustOpen(t, path))); !slices.Equal(got, []string{f.root.ID, f.a.ID}) {
		t.Fatalf("after a failed and a good append: %v", got)
	}
}
