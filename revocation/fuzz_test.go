package revocation

import (
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
