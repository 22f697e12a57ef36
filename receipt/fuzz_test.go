package receipt_test

import (
	"strings"
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
	f.Add([]byte(`{"schema_version":"audit_checkpoint/2","recovered":true}`))
	f.Add([]byte(`{"at":"2026-11-25T21:00:06.000Z","audit_prev":"` + strings.Repeat("ab", 32) + `","audit_seq":4,"final":false,"head":"` + strings.Repeat("ab", 32) + `","length":3,"recovered":null,"schema_version":"audit_checkpoint/2"}`))
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

// FuzzParseEntry: an audit log entry without a proof is read only when it
// is not a checkpoint and has its audit_seq, and never verifies.
func FuzzParseEntry(f *testing.F) {
	f.Add([]byte(`{"at":"2026-11-25T21:00:06.000Z","audit_prev":"` + strings.Repeat("ab", 32) + `","audit_seq":4,"final":false,"head":"` + strings.Repeat("ab", 32) + `","length":3,"recovered":false,"schema_version":"audit_checkpoint/2"}`))
	f.Add([]byte(`{"schema_version":"audit_checkpoint/3","checkpoint":"a\n0\nAA==\n\n— a AAAA\n"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := receipt.ParseEntry(data)
		if err != nil {
			return
		}
		again, err := canon.Marshal(r.Body)
		if err != nil || string(again) != string(data) {
			t.Fatalf("accepted non-canonical input %q", data)
		}
		if !r.Signed() {
			if _, ckpt := r.Body.(*receipt.CheckpointBody); ckpt || r.Position().Seq == 0 {
				t.Fatalf("an unsigned %s outside a log was read", r.Kind)
			}
			if r.Verify(nil) == nil {
				t.Fatal("an unsigned entry verifies")
			}
		}
	})
}
