package render

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Name writes a name as it is when it is plain printable ASCII
// without quotes, else Go-quoted, so that a hostile name cannot pass for
// part of a message.
func Name(n string) string {
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return strconv.Quote(n)
		}
	}
	if n == "" {
		return `""`
	}
	return n
}

// Escaped replaces what a terminal or a chat window would act on (control
// characters, line and paragraph separators, bidirectional overrides, and
// invalid UTF-8) by "\\u" escapes, so that no part of a message can pass
// for something else.
func Escaped(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return r < 0x20 || r >= 0x7f && r < 0xa0 || r == utf8.RuneError || r == 0x2028 || r == 0x2029 ||
		r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}
