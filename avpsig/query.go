package avpsig

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrBadQuery is wrapped when a query string has an invalid percent escape.
var ErrBadQuery = errors.New("query is not valid URL encoding")

// Pair is one decoded query parameter.
type Pair struct{ Key, Value string }

// CanonicalQuery returns the canonical form of a raw query string (the part
// of a URL after "?", as sent): the pairs separated by "&" (empty segments
// skipped), each split at its first "=" (a key alone has a blank value),
// decoded ("+" is a space, %XX a byte), then canonicalized as by
// CanonicalPairs. Decoded bytes are kept as they are, so two queries with
// different bytes never share a canonical form. An invalid escape is an
// error wrapping ErrBadQuery.
func CanonicalQuery(rawQuery string) (string, error) {
	pairs, err := ParseQuery(rawQuery)
	if err != nil {
		return "", err
	}
	return CanonicalPairs(pairs), nil
}

// ParseQuery decodes a raw query string into its pairs, in order, as
// CanonicalQuery reads it.
func ParseQuery(rawQuery string) ([]Pair, error) {
	var pairs []Pair
	for seg := range strings.SplitSeq(rawQuery, "&") {
		if seg == "" {
			continue
		}
		k, v, _ := strings.Cut(seg, "=")
		dk, err := unescape(k)
		if err != nil {
			return nil, err
		}
		dv, err := unescape(v)
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, Pair{dk, dv})
	}
	return pairs, nil
}

// CanonicalPairs sorts decoded pairs by key and then value (bytewise, which
// for UTF-8 is code point order) and joins them as key=value with "&",
// percent-encoding every byte except A–Z a–z 0–9 - . _ ~ with upper-case
// hex. No pairs give the empty string.
func CanonicalPairs(pairs []Pair) string {
	sorted := slices.Clone(pairs)
	slices.SortFunc(sorted, func(a, b Pair) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Value, b.Value))
	})
	var b strings.Builder
	for i, p := range sorted {
		if i > 0 {
			b.WriteByte('&')
		}
		escape(&b, p.Key)
		b.WriteByte('=')
		escape(&b, p.Value)
	}
	return b.String()
}

const upperHex = "0123456789ABCDEF"

func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func escape(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unescape decodes form encoding: "+" is a space and %XX a byte.
func unescape(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			out = append(out, ' ')
		case '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("%w: %q ends inside an escape", ErrBadQuery, clip(s))
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("%w: %q has an invalid escape %q", ErrBadQuery, clip(s), s[i:i+3])
			}
			out = append(out, hi<<4|lo)
			i += 2
		default:
			out = append(out, c)
		}
	}
	return string(out), nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
