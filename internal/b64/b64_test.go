package b64

import (
	"bytes"
	"encoding/base64"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for n := 0; n <= 70; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(0xff - 7*i)
		}
		s := Encode(b)
		if want := base64.RawURLEncoding.EncodeToString(b); s != want {
			t.Fatalf("Encode(%d bytes) = %q, want %q", n, s, want)
		}
		got, err := Decode(s)
		if err != nil {
			t.Fatalf("Decode(Encode(%d bytes)): %v", n, err)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("Decode(Encode(%x)) = %x", b, got)
		}
		if DecodedLen(len(s)) != n {
			t.Fatalf("DecodedLen(%d) = %d, want %d", len(s), DecodedLen(len(s)), n)
		}
	}
}

func TestDecodeKnown(t *testing.T) {
	tests := []struct {
		in   string
		want []byte
	}{
		{"", []byte{}},
		{"AA", []byte{0}},
		{"_w", []byte{0xff}},
		{"-_8", []byte{0xfb, 0xff}},
		{"-_-_", []byte{0xfb, 0xff, 0xbf}},
	}
	for _, tt := range tests {
		got, err := Decode(tt.in)
		if err != nil || !bytes.Equal(got, tt.want) {
			t.Errorf("Decode(%q) = %x, %v; want %x", tt.in, got, err, tt.want)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"padding one byte", "AA=="},
		{"padding two bytes", "AAA="},
		{"padding on full quantum", "AAAA===="},
		{"standard alphabet plus", "+_8"},
		{"standard alphabet slash", "-/8"},
		{"nonzero trailing bits of one byte", "AB"},
		{"nonzero trailing bits of one byte, high", "AP"},
		{"nonzero trailing bits of two bytes", "AAB"},
		{"impossible length", "AAAAA"},
		{"single character", "A"},
		{"line feed", "AAAA\nAAAA"},
		{"carriage return", "AAAA\rAAAA"},
		{"trailing line feed", "AAAA\n"},
		{"leading line feed", "\nAA"},
		{"space", "AA AA"},
		{"tab", "AA\tAA"},
		{"NUL", "AA\x00A"},
		{"non-ASCII", "AAé"},
		{"dot", "AA.A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Decode(tt.in); err == nil {
				t.Fatalf("Decode(%q) = %x, want an error", tt.in, got)
			}
		})
	}
}

// FuzzDecode holds Decode to its promise that every value has exactly one
// encoding: whatever it accepts, Encode writes back identically.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"", "AA", "AB", "AA==", "-_8", "+/8", "AAAA\nAAAA", "_w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := Decode(s)
		if err != nil {
			return
		}
		if got := Encode(b); got != s {
			t.Fatalf("Decode(%q) = %x, which encodes as %q", s, b, got)
		}
	})
}
