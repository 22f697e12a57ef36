package proxy

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// strReference is scanner.str as it was before its first loop kept the
// index in a local and looked bytes up in a table: the reference the
// faster one is held to, result and position alike.
func (s *scanner) strReference() ([]byte, bool) {
	start := s.i
	if !s.eat('"') {
		return nil, false
	}
	for n := 0; n < 16 && s.i < len(s.b); n++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start:s.i], true
		case c == '\\':
			s.i += 2
		case c < 0x20:
			return nil, false
		default:
			s.i++
		}
	}
	for {
		if s.i > len(s.b) {
			return nil, false
		}
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			return nil, false
		}
		k := firstSpecial(s.b[s.i : s.i+j])
		if k < 0 {
			s.i += j + 1
			return s.b[start:s.i], true
		}
		p := s.i + k
		if s.b[p] != '\\' || p+1 >= len(s.b) {
			return nil, false
		}
		s.i = p + 2
	}
}

// sameStr fails t unless str and strReference read b from at alike: the
// same string (the same bytes of b), the same verdict, the same position.
func sameStr(t *testing.T, b []byte, at int) {
	t.Helper()
	s0, s1 := scanner{b: b, i: at}, scanner{b: b, i: at}
	v0, ok0 := s0.strReference()
	v1, ok1 := s1.str()
	if ok0 != ok1 || !bytes.Equal(v0, v1) || (v0 == nil) != (v1 == nil) || s0.i != s1.i {
		t.Fatalf("%q at %d: str %q %v at %d, reference %q %v at %d", b, at, v1, ok1, s1.i, v0, ok0, s0.i)
	}
}

// TestStrMatchesReference: on strings of every length around the first
// loop's 16 bytes, with quotes, backslashes (also last), control
// characters and bytes ≥ 0x80 anywhere (a fixed seed: the same inputs
// every run), str reads exactly what the reference reads.
func TestStrMatchesReference(t *testing.T) {
	alphabet := []byte("\"\\\x00\x1f\x20a z0\x7f\x80\xe2\xff{}:,")
	r := rand.New(rand.NewPCG(20, 2))
	for range 300000 {
		n := r.IntN(48)
		b := make([]byte, n)
		for i := range b {
			if r.IntN(3) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = 'a' + byte(r.IntN(26))
			}
		}
		if n > 0 && r.IntN(2) == 0 {
			b[0] = '"'
		}
		sameStr(t, b, 0)
		if n > 0 {
			sameStr(t, b, r.IntN(n))
		}
	}
}

func FuzzStr(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `"a\\"`, "\"\x01\"", `"0123456789abcdef"`, `"0123456789abcde\"`, `"unterminated`, `"\`, `x"`} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, at int) {
		if at < 0 || at > len(b) {
			return
		}
		sameStr(t, b, at)
	})
}
