package receipt_test

import (
	"testing"

	"github.com/delegateos/delegateos/receipt"
)

// BenchmarkSign is the audit log writer's work for one receipt: building
// it, canonical JSON and the Ed25519 signature.
func BenchmarkSign(b *testing.B) {
	s, _ := signer(b)
	names := []string{"decision", "decision_refused", "execution"}
	for i, body := range samples(b)[:3] {
		pos := receipt.PositionOf(body)
		b.Run(names[i], func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				*pos = receipt.Position{Seq: int64(i + 1), Prev: receipt.GenesisPrev}
				if _, err := s.Sign(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseVerify is audit verify's work for one receipt.
func BenchmarkParseVerify(b *testing.B) {
	s, _ := signer(b)
	out, err := s.Sign(samples(b)[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := receipt.Parse(out)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Verify(nil); err != nil {
			b.Fatal(err)
		}
	}
}
