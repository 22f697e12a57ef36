package timestamp

import (
	"math/rand/v2"
	"regexp"
	"testing"
	"time"
)

var canonicalForm = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)

func TestFormat(t *testing.T) {
	ist := time.FixedZone("IST", 5*3600+30*60)
	pst := time.FixedZone("PST", -8*3600)
	tests := []struct {
		name string
		in   time.Time
		want string
	}{
		{"UTC whole second", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC), "2026-01-02T15:04:05.000Z"},
		{"milliseconds", time.Date(2026, 1, 2, 15, 4, 5, 123e6, time.UTC), "2026-01-02T15:04:05.123Z"},
		{"sub-millisecond truncated, not rounded", time.Date(2026, 1, 2, 15, 4, 5, 999_999_999, time.UTC), "2026-01-02T15:04:05.999Z"},
		{"one nanosecond", time.Date(2026, 1, 2, 15, 4, 5, 1, time.UTC), "2026-01-02T15:04:05.000Z"},
		{"microseconds", time.Date(2026, 1, 2, 15, 4, 5, 120_500, time.UTC), "2026-01-02T15:04:05.000Z"},
		{"positive offset", time.Date(2026, 1, 2, 5, 0, 0, 7e6, ist), "2026-01-01T23:30:00.007Z"},
		{"negative offset crossing a year", time.Date(2025, 12, 31, 20, 0, 0, 0, pst), "2026-01-01T04:00:00.000Z"},
		{"local time", time.Date(2026, 6, 1, 12, 0, 0, 0, time.Local), time.Date(2026, 6, 1, 12, 0, 0, 0, time.Local).UTC().Format("2006-01-02T15:04:05") + ".000Z"},
		{"epoch", time.Unix(0, 0), "1970-01-01T00:00:00.000Z"},
		{"before epoch", time.UnixMilli(-1), "1969-12-31T23:59:59.999Z"},
		{"leap day", time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC), "2028-02-29T00:00:00.000Z"},
		{"year 1", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), "0001-01-01T00:00:00.000Z"},
		{"year 9999", time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC), "9999-12-31T23:59:59.999Z"},
		{"monotonic reading", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC).Add(time.Since(time.Now())), "2026-01-02T15:04:05.000Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Format(tt.in)
			if got != tt.want {
				t.Fatalf("Format = %q, want %q", got, tt.want)
			}
			if !canonicalForm.MatchString(got) {
				t.Fatalf("Format = %q, not YYYY-MM-DDTHH:MM:SS.sssZ", got)
			}
		})
	}
}

func TestFormatParseRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	zones := []*time.Location{time.UTC, time.FixedZone("A", 3600), time.FixedZone("B", -(9*3600 + 30*60)), time.FixedZone("C", 14*3600)}
	lo := time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC).UnixNano() / 1e9
	hi := time.Date(9999, 12, 30, 0, 0, 0, 0, time.UTC).Unix()
	for range 2000 {
		in := time.Unix(lo+r.Int64N(hi-lo), r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
		s := Format(in)
		if !canonicalForm.MatchString(s) {
			t.Fatalf("Format(%v) = %q, not YYYY-MM-DDTHH:MM:SS.sssZ", in, s)
		}
		back, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(Format(%v)) = %v", in, err)
		}
		if want := Truncate(in); !back.Equal(want) {
			t.Fatalf("Parse(Format(%v)) = %v, want %v", in, back, want)
		}
		if Format(back) != s {
			t.Fatalf("Format(Parse(%q)) = %q", s, Format(back))
		}
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2026-01-02T15:04:05.000Z", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		{"2026-01-02T15:04:05Z", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		{"2026-01-02T15:04:05.1Z", time.Date(2026, 1, 2, 15, 4, 5, 100e6, time.UTC)},
		{"2026-01-02T15:04:05.123456Z", time.Date(2026, 1, 2, 15, 4, 5, 123456e3, time.UTC)},
		{"2026-01-02T15:04:05.123456789Z", time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC)},
		{"2026-01-02T15:04:05+00:00", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		{"2026-01-02T20:34:05+05:30", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		{"2026-01-02T07:04:05.250-08:00", time.Date(2026, 1, 2, 15, 4, 5, 250e6, time.UTC)},
		{"2026-01-01T23:59:59-23:59", time.Date(2026, 1, 2, 23, 58, 59, 0, time.UTC)},
		{"2028-02-29T00:00:00Z", time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if !got.Equal(tt.want) {
			t.Errorf("Parse(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		"",
		"garbage",
		"2026-01-02",
		"15:04:05Z",
		"2026-01-02T15:04:05",       // no zone
		"2026-01-02 15:04:05Z",      // space for T
		"2026-01-02T15:04:05.Z",     // empty fraction
		"2026-01-02T15:04:05,123Z",  // comma fraction
		"2026-01-02T15:04Z",         // no seconds
		"2026-1-2T15:04:05Z",        // unpadded
		"26-01-02T15:04:05Z",        // two-digit year
		"2026-13-02T15:04:05Z",      // month 13
		"2026-02-30T15:04:05Z",      // no such day
		"2027-02-29T00:00:00Z",      // not a leap year
		"2026-01-02T24:00:00Z",      // hour 24
		"2026-01-02T15:60:05Z",      // minute 60
		"2026-01-02T15:04:61Z",      // second 61
		"2026-01-02T15:04:05+0530",  // offset without colon
		"2026-01-02T15:04:05+05",    // offset without minutes
		"2026-01-02T15:04:05+24:00", // offset out of range
		"2026-01-02T15:04:05+23:60", // offset minute out of range
		"2026-01-02T15:04:05-99:00", // offset out of range
		"2026-01-02T15:04:05+0a:00", // offset not digits
		"2026-01-02T1:04:05Z",       // one-digit hour
		"2026-01-02T15:04:05.-1Z",   // signed fraction
		"2026-01-02T15:04:05.12a3Z", // letter in fraction
		"2026-01-02t15:04:05z",      // lower case
		"2026-01-02T15:04:05\x00Z",  // NUL
		"2026-01-02T15:04:05ZZ",     // trailing data
		"2026-01-02T15:04:05Z ",     // trailing space
		" 2026-01-02T15:04:05Z",     // leading space
		"2026-01-02T15:04:05UTC",    // zone name
		"1767366245",                // Unix seconds
		"Fri, 02 Jan 2026 15:04:05 GMT",
		"+012026-01-02T15:04:05.000Z", // extended year
	} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, got)
		}
	}
}

func TestTruncate(t *testing.T) {
	in := time.Date(2026, 1, 2, 20, 34, 5, 123_999_999, time.FixedZone("IST", 5*3600+30*60))
	got := Truncate(in)
	want := time.Date(2026, 1, 2, 15, 4, 5, 123e6, time.UTC)
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("Truncate = %v, want %v", got, want)
	}
}
