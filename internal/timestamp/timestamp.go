// Package timestamp writes and reads protocol timestamps.
//
// The reference implementation writes JavaScript's Date.toISOString form,
// YYYY-MM-DDTHH:MM:SS.sssZ (UTC, milliseconds). Timestamps are signed as
// strings, so the writer must produce exactly that form; the reader accepts
// any RFC 3339 time so that tokens from other implementations compare
// correctly, and every comparison is made on parsed times, never strings.
package timestamp

import (
	"fmt"
	"time"
)

// Layout is the canonical written form.
const Layout = "2006-01-02T15:04:05.000Z"

// Format returns t in UTC, truncated to milliseconds, in the canonical form.
func Format(t time.Time) string { return t.UTC().Format(Layout) }

// Parse reads an RFC 3339 timestamp (with or without fractional seconds).
func Parse(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || !rfc3339Shape(s) {
		return time.Time{}, fmt.Errorf("invalid timestamp %q: want RFC 3339, e.g. 2026-01-02T15:04:05.000Z", s)
	}
	return t, nil
}

// rfc3339Shape reports whether s is laid out as an RFC 3339 date-time.
// time.Parse checks the field ranges but also takes what RFC 3339 does not:
// a one-digit hour, a comma before the fraction, and zone offsets of 24:00
// or more (go.dev/issue/54580); another implementation would refuse those.
func rfc3339Shape(s string) bool {
	const date = "2006-01-02T15:04:05"
	if len(s) <= len(date) {
		return false
	}
	for i := range len(date) {
		if isDigit(date[i]) != isDigit(s[i]) || !isDigit(s[i]) && s[i] != date[i] {
			return false
		}
	}
	rest := s[len(date):]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
		if n == 1 {
			return false
		}
		rest = rest[n:]
	}
	if rest == "Z" {
		return true
	}
	return len(rest) == len("+07:00") && (rest[0] == '+' || rest[0] == '-') &&
		isDigit(rest[1]) && isDigit(rest[2]) && rest[3] == ':' && isDigit(rest[4]) && isDigit(rest[5]) &&
		rest[1:3] < "24" && rest[4:6] < "60"
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// Truncate drops everything below a millisecond, so a time survives a
// Format/Parse round trip unchanged.
func Truncate(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
