package revocation

import (
	"encoding/json"
	"hash/maphash"
	"slices"
	"testing"
)

// FuzzParseList: ParseList never panics, and a list that parses survives
// MarshalJSON → ParseList (and the file form) with the same entries.
func FuzzParseList(f *testing.F) {
	k1, k2 := testKey(f, 1), testKey(f, 2)
	a := testEntry(f, k1, testID("a"), ScopeChain)
	b := testEntry(f, k2, testID("b"), ScopeBlock)
	foreign := Entry{RevocationID: testID("c"), RevokedBy: k1.ID(), RevokedAt: "2026-01-02T04:04:05+01:00", Scope: ScopeBlock}
	foreign.Signature = signBytes(k1, foreign.signedPayload())
	for _, entries := range [][]Entry{nil, {a}, {a, b, foreign}, {b, b}} {
		f.Add(must(marshalEntries(entries, false)))
		f.Add(must(marshalEntries(entries, true)))
	}
	f.Add([]byte(`[{"revocationId":"x","revocationId":"y"}]`))
	f.Add([]byte(`[{"RevocationId":"x"}]`))
	f.Add([]byte(`[null, {}, []]`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseList(data)
		if err != nil {
			return
		}
		for _, form := range []func() ([]byte, error){l.MarshalJSON, l.fileBytes} {
			out, err := form()
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseList(out)
			if err != nil {
				t.Fatalf("%s does not parse back: %v", out, err)
			}
			if !slices.Equal(back.Entries(), l.Entries()) {
				t.Fatalf("round trip changed the entries:\n%+v\n%+v", l.Entries(), back.Entries())
			}
		}
	})
}

// FuzzAppendedTo: when File reads only the entries appended to the list it
// read before, it ends with exactly the list a parse of the whole new file
// gives, and never takes bytes the whole parse refuses.
func FuzzAppendedTo(f *testing.F) {
	k1, k2 := testKey(f, 1), testKey(f, 2)
	a := testEntry(f, k1, testID("a"), ScopeChain)
	b := testEntry(f, k2, testID("b"), ScopeBlock)
	c := testEntry(f, k1, testID("c"), ScopeBlock)
	for _, lines := range []bool{false, true} {
		for _, pair := range [][2][]Entry{{{a}, {a, b}}, {{a, b}, {a, b, c, a}}, {{a}, {b, a}}, {nil, {a}}, {{a, b}, {a}}} {
			f.Add(must(marshalEntries(pair[0], lines)), must(marshalEntries(pair[1], lines)))
		}
	}
	old := must(marshalEntries([]Entry{a}, true))
	head := old[:listHead(old)]
	for _, tail := range []string{",]", ", ]", ",{}]", ",null]", "," + string(must(json.Marshal(b))) + "] x", "," + string(must(json.Marshal(b))) + ",]", " ," + string(must(json.Marshal(b))) + "]\n"} {
		f.Add(old, append(slices.Clip(head), tail...))
	}
	f.Fuzz(func(t *testing.T, old, data []byte) {
		prevList, err := ParseList(old)
		if err != nil {
			return
		}
		file := &File{seed: maphash.MakeSeed()}
		prev := &fileState{list: prevList, read: true}
		if prevList.Len() > 0 {
			prev.head = listHead(old)
		}
		prev.headSum, prev.sum = file.sums(old, prev.head)
		want, wantErr := ParseList(data)
		if !file.appendedTo(prev, data) {
			return
		}
		if wantErr != nil {
			t.Fatalf("appended entries taken from a file that does not parse: %v\nold %q\nnew %q", wantErr, old, data)
		}
		if got := prev.list.Entries(); !slices.Equal(got, want.Entries()) {
			t.Fatalf("the list read in part differs from the whole:\n%+v\n%+v", got, want.Entries())
		}
	})
}
