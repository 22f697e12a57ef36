package identity

import (
	"bytes"
	"math/rand"
	"strings"
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
func TestBase58Exported(t *testing.T) {
	for _, b := range [][]byte{{0}, {0, 0, 1}, bytes.Repeat([]byte{0xff}, 64), []byte("hello")} {
		s := Base58Encode(b)
		got, err := Base58Decode(s)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("Base58Decode(Base58Encode(%x)) = %x, %v", b, got, err)
		}
	}
	if _, err := Base58Decode(strings.Repeat("2", maxBase58Len+1)); err == nil {
		t.Error("an over-long input was decoded")
	}
	for _, bad := range []string{"", "0", "O", "I", "l", "z+"} {
		if _, err := Base58Decode(bad); err == nil {
			t.Errorf("Base58Decode(%q) succeeded", bad)
		}
	}
}

// base58Encode is the plain Bitcoin base58 encoding (big-endian base
// conversion, one digit at a time, each leading zero byte written as '1'):
// the reference Base58Encode, nine digits at a time, is held equal to.
func base58Encode(b []byte) string {
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	// log(256)/log(58) < 1.37
	digits := make([]byte, 0, len(b)*137/100+1)
	for _, c := range b[zeros:] {
		carry := int(c)
		for i := range digits {
			carry += int(digits[i]) << 8
			digits[i] = byte(carry % 58)
			carry /= 58
		}
		for carry > 0 {
			digits = append(digits, byte(carry%58))
			carry /= 58
		}
	}
	out := make([]byte, zeros+len(digits))
	for i := 0; i < zeros; i++ {
		out[i] = '1'
	}
	for i, d := range digits {
		out[len(out)-1-i] = base58Alphabet[d]
	}
	return string(out)
}
