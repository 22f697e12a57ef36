package attest

import (
	"context"
	"testing"
)

// BenchmarkVerify is one attestation against its contract: signature,
// contract lookup (memory store), schema and spec checks, on a small output.
func BenchmarkVerify(b *testing.B) {
	w := newWorld(b)
	a := testAttestation(b)
	for b.Loop() {
		if _, err := w.v.Verify(context.Background(), a); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseVerifySignature(b *testing.B) {
	data := mustMarshal(b, create(b, aliceKey, fullParams()))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		a, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Verify(); err != nil {
			b.Fatal(err)
		}
	}
}
