package render

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ct_a1b2c3d4e5f6", "ct_a1b2c3d4e5f6"},
		{"docs:read:/project/**", "docs:read:/project/**"},
		{"ct plain, [ok] → é", "ct plain, [ok] → é"},
		{"", `""`},
		{"two\nlines", `"two\nlines"`},
		{"cr\rhere", `"cr\rhere"`},
		{"tab\there", `"tab\there"`},
		{"\x1b[2Jclear", `"\x1b[2Jclear"`},
		{"evil\u202eexe.txt", `"evil\u202eexe.txt"`},
		{"nbsp\u00a0", `"nbsp\u00a0"`},
		{"line\u2028sep", `"line\u2028sep"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{"\ufffd", "\"\ufffd\""}, // valid, but read as a sign of invalid input
	}
	for _, tt := range tests {
		if got := Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMermaidText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ct_a1b2c3d4e5f6", "ct_a1b2c3d4e5f6"},
		{"a-b.c d", "a-b.c d"},
		{"docs:read:/p/**", "docs#58;read#58;#47;p#47;#42;#42;"},
		{`"]`, "#34;#93;"},
		{"x --> y", "x --#62; y"},
		{"\n", "#10;"},
		{"#quot;", "#35;quot#59;"},
		{"<b>&amp;", "#60;b#62;#38;amp#59;"},
		{"→", "#8594;"},
		{"\xff", "#65533;"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := MermaidText(tt.in); got != tt.want {
			t.Errorf("MermaidText(%q) = %q, want %q", tt.in, got, tt.want)
		}
		checkMermaidText(t, tt.in, MermaidText(tt.in))
	}
}

// checkPrintable fails unless p is one printable line that shows s.
func checkPrintable(t *testing.T, s, p string) {
	t.Helper()
	if p == "" || !utf8.ValidString(p) {
		t.Fatalf("Printable(%q) = %q: empty or not UTF-8", s, p)
	}
	for _, r := range p {
		if !unicode.IsPrint(r) {
			t.Fatalf("Printable(%q) = %q holds %U", s, p, r)
		}
	}
	if p != s && !strings.HasPrefix(p, `"`) {
		t.Fatalf("Printable(%q) = %q changed the string without quoting it", s, p)
	}
}

// checkMermaidText fails unless m holds only letters, digits, space, '_',
// '-', '.' and well-formed decimal entity codes, and decodes back to s
// (with invalid UTF-8 read as U+FFFD).
func checkMermaidText(t *testing.T, s, m string) {
	t.Helper()
	var dec strings.Builder
	for i := 0; i < len(m); i++ {
		c := m[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == ' ', c == '_', c == '-', c == '.':
			dec.WriteByte(c)
		case c == '#':
			j, n := i+1, 0
			for j < len(m) && '0' <= m[j] && m[j] <= '9' && n <= unicode.MaxRune {
				n = n*10 + int(m[j]-'0')
				j++
			}
			if j == i+1 || j == len(m) || m[j] != ';' {
				t.Fatalf("MermaidText(%q) = %q: malformed entity code at %d", s, m, i)
			}
			dec.WriteRune(rune(n))
			i = j
		default:
			t.Fatalf("MermaidText(%q) = %q: raw %q at %d", s, m, c, i)
		}
	}
	var want strings.Builder
	for _, r := range s {
		want.WriteRune(r) // each invalid byte as U+FFFD
	}
	if dec.String() != want.String() {
		t.Fatalf("MermaidText(%q) = %q decodes to %q", s, m, dec.String())
	}
}
