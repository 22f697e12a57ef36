package budget

import (
	"encoding/binary"
	"testing"
)

// FuzzParseLive: a live record read from the state directory (another
// proxy's, killed at any point) is read or refused, never a panic, and
// what it reads holds only counts above zero.
func FuzzParseLive(f *testing.F) {
	rec := make([]byte, liveHeader+64)
	copy(rec, liveMagic)
	binary.NativeEndian.PutUint64(rec[8:], 7)
	rec[16] = 5
	copy(rec[17:], "ident")
	rec[22] = 7
	copy(rec[23:], "machine")
	rec[30] = 4
	copy(rec[31:], "inst")
	binary.NativeEndian.PutUint64(rec[liveHeader:], 3)
	binary.NativeEndian.PutUint32(rec[liveHeader+8:], 6)
	copy(rec[liveHeader+16:], "root/k")
	f.Add(rec)
	f.Add(rec[:liveHeader+20])
	f.Add(make([]byte, liveHeader))
	f.Add([]byte(liveMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseLive(b)
		if err != nil || st == nil {
			return
		}
		if st.ID == "" || st.Gen <= 0 {
			t.Fatalf("a record without an identity: %+v", st)
		}
		for k, n := range st.Seen {
			if n <= 0 {
				t.Fatalf("%s: %d counted", k, n)
			}
		}
	})
}
