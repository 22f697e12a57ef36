package avpsig

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// BenchmarkVerify is the per-request cost of holder-of-key: parse, one
// Ed25519 verification, the nonce recorded. Each iteration signs with a
// fresh nonce outside the timer.
func BenchmarkVerify(b *testing.B) {
	holder := testKey(1)
	body := bytes.Repeat([]byte("x"), 512)
	v := &Verifier{Now: func() time.Time { return t0 }, MaxNonces: 1 << 30, MaxNoncesPerTree: 1 << 30}
	want := did(holder)
	var nonce [16]byte
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		binary.BigEndian.PutUint64(nonce[:], uint64(i))
		s, err := Sign(holder, "POST", "/mcp", "a=1", body, t0, bytes.NewReader(nonce[:]))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := v.VerifyParts("POST", "/mcp", "a=1", []string{s.Signature}, nil, body, want); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCanonicalQuery is the canonical form of a typical query.
func BenchmarkCanonicalQuery(b *testing.B) {
	for b.Loop() {
		if _, err := CanonicalQuery("session=abc123&b=hello+world&a=2&a=1&path=%2Fx%2Fy"); err != nil {
			b.Fatal(err)
		}
	}
}
