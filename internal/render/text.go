package render

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Printable returns s if it is valid UTF-8 made of printable characters
// (unicode.IsPrint, which counts the ASCII space and no other), and s
// Go-quoted otherwise; the empty string is written "". The result is never
// empty and holds no line break, terminal escape, bidirectional override
// or invalid UTF-8, so it cannot forge or hide a line of output.
func Printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}
