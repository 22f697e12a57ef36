// Package canon produces RFC 8785 (JCS) canonical JSON.
//
// Marshal handles any value through encoding/json and gowebpki/jcs. The
// Append helpers let hot paths with a fixed schema write canonical bytes
// directly; tests hold them equal to Marshal.
package canon

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// MaxSafeInteger is the largest integer every JSON implementation (in
// particular JavaScript's) represents exactly. Integers in signed structures
// are limited to [0, MaxSafeInteger] so that all implementations canonicalize
// them to the same bytes.
const MaxSafeInteger = 1<<53 - 1

// Marshal returns the canonical JSON encoding of v.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a canonical JSON string: only '"', '\\' and
// control characters are escaped (the short forms where JSON has them,
// otherwise \u00xx in lower case); everything else is written as UTF-8.
// Invalid UTF-8 is written as U+FFFD, as encoding/json decodes it.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\ufffd"...)
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendInt appends n in canonical form. Callers keep n within
// ±MaxSafeInteger, where the ECMAScript number form is the plain decimal.
func AppendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
