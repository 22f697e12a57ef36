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
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid timestamp %q: want RFC 3339, e.g. 2026-01-02T15:04:05.000Z", s)
	}
	return t, nil
}

// Truncate drops everything below a millisecond, so a time survives a
// Format/Parse round trip unchanged.
func Truncate(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
