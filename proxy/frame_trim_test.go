package proxy

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// trimFrame is bytes.TrimRight(b, "\r\n"): the same bytes, the same
// backing array, on random lines made mostly of line endings and the
// bytes around them.
func TestTrimFrameIsTrimRight(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 11))
	alphabet := []byte("\r\n\r\n \t{}\"a\x00\xc2\x85\xe2\x80\xa8")
	for i := 0; i < 200000; i++ {
		b := make([]byte, rng.IntN(12))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		got, want := trimFrame(b), bytes.TrimRight(b, "\r\n")
		if !bytes.Equal(got, want) || len(got) > 0 && &got[0] != &b[0] {
			t.Fatalf("trimFrame(%q) = %q, want %q", b, got, want)
		}
	}
	if got := trimFrame(nil); len(got) != 0 {
		t.Fatalf("trimFrame(nil) = %q", got)
	}
}
