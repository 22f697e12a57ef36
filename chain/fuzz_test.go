package chain

import (
	"bytes"
	"testing"
	"unicode"
	"unicode/utf8"
)

// fuzzLog is a valid log for the seeds: the fixture chain, a completion
// and a revocation.
func fuzzLog(tb testing.TB) [][]byte {
	f, sy := newFixture(tb), newSybil(tb)
	evs := []*event{
		{Op: opInsert, Delegation: &f.root},
		{Op: opInsert, Delegation: &f.a},
		{Op: opInsert, Delegation: &f.b},
		{Op: opComplete, ID: f.b.ID, AttestationID: attID, At: ts(1)},
		{Op: opFail, ID: f.b.ID, At: ts(1)},
		{Op: opRevoke, ID: f.a.ID, At: ts(2)},
		// As written since keys: both names; and by key alone.
		{Op: opComplete, ID: f.b.ID, Key: f.b.Key, At: ts(3)},
		{Op: opRevoke, Key: f.root.Key, At: ts(4)},
		// A tree that shares IDs with the fixture's.
		{Op: opInsert, Delegation: &sy.root},
		{Op: opInsert, Delegation: &sy.a},
	}
	lines := make([][]byte, len(evs))
	for i, e := range evs {
		l, err := encodeEvent(e)
		if err != nil {
			tb.Fatal(err)
		}
		lines[i] = l
	}
	return lines
}

// A line that decodes re-encodes to exactly itself: a line has one reading.
func FuzzDecodeLine(f *testing.F) {
	for _, l := range fuzzLog(f) {
		f.Add(bytes.TrimSuffix(l, []byte("\n")))
	}
	f.Add([]byte(`{"op":"revoke"}`))
	f.Add([]byte(`{"at":"2026-01-01T00:02:00.000Z","id":"del_000000000002","id":"del_000000000002","op":"revoke"}`))
	f.Add([]byte(`{"delegation":null,"op":"insert"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := decodeLine(line)
		if err != nil {
			return
		}
		out, err := encodeEvent(e)
		if err != nil {
			t.Fatalf("a decoded line does not encode: %v", err)
		}
		if !bytes.Equal(out, append(bytes.Clone(line), '\n')) {
			t.Fatalf("decoded %q but encodes as %q", line, out)
		}
	})
}

// Replaying any bytes never panics, stops at the last newline, and leaves
// only records that pass the checks again from scratch.
func FuzzReplayLog(f *testing.F) {
	lines := fuzzLog(f)
	all := bytes.Join([][]byte{lines[0], lines[1], lines[2], lines[3], lines[5]}, nil)
	f.Add(all)
	f.Add(all[:len(all)-7])
	f.Add(bytes.Join([][]byte{lines[0], lines[2]}, nil))
	f.Add(bytes.Join([][]byte{lines[0], lines[1], lines[3], lines[4]}, nil))
	f.Add(bytes.Join([][]byte{lines[0], lines[1], lines[2], lines[8], lines[9], lines[6], lines[7]}, nil))
	f.Add([]byte("\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var s state
		n, err := parseLog(data, 1, func(e *event) error { _, err := s.apply(e); return err })
		if n > len(data) || n > 0 && data[n-1] != '\n' {
			t.Fatalf("read %d bytes of %d, not ending at a newline", n, len(data))
		}
		if err == nil && bytes.IndexByte(data[n:], '\n') >= 0 {
			t.Fatal("a complete line was left unread without an error")
		}
		// What the state holds inserts again, in order, into a new store.
		m := NewMemory()
		for _, d := range s.list() {
			d.Status, d.CompletedAt, d.AttestationID = StatusActive, "", ""
			if err := m.Insert(d); err != nil {
				t.Fatalf("a replayed record does not insert again: %v", err)
			}
		}
	})
}

// Rendering never lets a string through that could break a line or a
// diagram.
func FuzzRenderEscapes(f *testing.F) {
	f.Add("ct_000000000001")
	f.Add("\"]\n x --> y")
	f.Add("#quot;<b>\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		checkMermaidLabel(t, mermaidText(s))
		p := printable(s)
		if !utf8.ValidString(p) {
			t.Fatalf("printable(%q) = %q is not UTF-8", s, p)
		}
		for _, r := range p {
			if !unicode.IsPrint(r) {
				t.Fatalf("printable(%q) = %q holds %U", s, p, r)
			}
		}
		d := Delegation{ID: s, ParentID: s, From: s, To: s, ContractID: s, Status: Status(s), CreatedAt: s, AttestationID: s}
		if lines := Text(Tree([]Delegation{d}), nil); len(lines) != 1 || bytes.ContainsAny([]byte(lines[0]), "\n\r") {
			t.Fatalf("Text: %q", lines)
		}
	})
}
