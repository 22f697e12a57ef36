// Package b64 is the one base64 flavour of the protocol: URL alphabet, no
// padding, strict (non-zero trailing bits, padding and line breaks are
// refused, so every value has exactly one encoding).
package b64

import (
	"encoding/base64"
	"strings"
)

var enc = base64.RawURLEncoding.Strict()

// Encode returns the unpadded base64url encoding of b.
func Encode(b []byte) string { return enc.EncodeToString(b) }

// Decode decodes an unpadded base64url string.
func Decode(s string) ([]byte, error) {
	// encoding/base64 skips '\r' and '\n' even in strict mode; a value with a
	// line break in it would be a second spelling of the same bytes.
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return nil, base64.CorruptInputError(i)
	}
	return enc.DecodeString(s)
}

// DecodedLen is the number of bytes Decode returns for an input of n characters.
func DecodedLen(n int) int { return enc.DecodedLen(n) }
