package receipt_test

import (
	"testing"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/receipt"
)

// FuzzParse: Parse never panics, and what it accepts is the canonical
// form of what it decoded, whose signature Verify can check without
// panicking.
func FuzzParse(f *testing.F) {
	s, _ := signer(f)
	for _, b := range samples(f) {
		out, err := s.Sign(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(out)
	}
	f.Add([]byte(`{"schema_version":"audit_checkpoint/1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := receipt.Parse(data)
		if err != nil {
			return
		}
		again, err := canon.Marshal(r.Body)
		if err != nil || string(again) != string(data) {
			t.Fatalf("accepted non-canonical input %q", data)
		}
		_ = r.Verify(nil)
	})
}
