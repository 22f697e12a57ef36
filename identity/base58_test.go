package identity

import (
	"bytes"
	"math/rand"
	"testing"
)

// Base58Encode gives base58Encode's text for any input, leading zero
// bytes and zero limbs included, and decodes back.
func TestBase58EncodeMatches(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	inputs := [][]byte{nil, {0}, {0, 0, 1}, {57}, {58}, bytes.Repeat([]byte{0xff}, 64), make([]byte, 64)}
	for range 2000 {
		b := make([]byte, r.Intn(80))
		r.Read(b)
		for i := 0; i < len(b) && r.Intn(3) == 0; i++ {
			b[i] = 0
		}
		inputs = append(inputs, b)
	}
	for _, b := range inputs {
		got, want := Base58Encode(b), base58Encode(b)
		if got != want {
			t.Fatalf("%x: %s, want %s", b, got, want)
		}
		if len(b) == 0 {
			continue
		}
		back, err := Base58Decode(got)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("%x: decoded %x %v", b, back, err)
		}
	}
}
