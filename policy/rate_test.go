package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	good := []struct {
		in   string
		want Rate
		out  string // String, when it differs from in
	}{
		{"30/1m", Rate{30, time.Minute}, ""},
		{"1/1s", Rate{1, time.Second}, ""},
		{"5/100ms", Rate{5, 100 * time.Millisecond}, ""},
		{"100/1h30m", Rate{100, 90 * time.Minute}, ""},
		{"10/24h", Rate{10, 24 * time.Hour}, ""},
		{"2/1.5s", Rate{2, 1500 * time.Millisecond}, ""},
		{"7/60s", Rate{7, time.Minute}, "7/1m"},
		{"1000000/1ms", Rate{MaxRateCalls, MinRatePer}, ""},
		{"3/2h0m10s", Rate{3, 2*time.Hour + 10*time.Second}, "3/2h10s"},
	}
	for _, g := range good {
		r, err := ParseRate(g.in)
		if err != nil || r != g.want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", g.in, r, err, g.want)
			continue
		}
		want := g.in
		if g.out != "" {
			want = g.out
		}
		if r.String() != want {
			t.Errorf("%+v.String() = %q, want %q", r, r.String(), want)
		}
		if back, err := ParseRate(r.String()); err != nil || back != r {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", r.String(), back, err, r)
		}
	}
	bad := []struct{ in, want string }{
		{"30", "has no '/': write N/DURATION, e.g. 30/1m"},
		{"30/m", "a duration starts with a number: write 30/1m"},
		{"30/min", "write 30/1m"},
		{"30/minute", "write 30/1m"},
		{"30/second", "write 30/1s"},
		{"30/1d", "durations have no days: write 30/24h"},
		{"30/2days", "durations have no days: write 30/48h"},
		{"30/1min", "write 30/1m"},
		{"30/5 minutes", "write a Go duration"},
		{"30/90mins", "write 30/90m"},
		{"30/h", "a duration starts with a number: write 30/1h"},
		{"30/day", "write 30/24h"},
		{"30/fortnight", "write a Go duration with its unit"},
		{"0/1m", "0 calls would refuse every call"},
		{"-1/1m", "out of range: N is from 1 to 1000000"},
		{"1000001/1m", "out of range: N is from 1 to 1000000"},
		{"+3/1m", `"+3" is not a whole number of calls`},
		{"03/1m", `"03" is not a whole number of calls`},
		{"3.5/1m", `"3.5" is not a whole number of calls`},
		{" 3/1m", `" 3" is not a whole number of calls`},
		{"3/1m ", `"1m " is not a duration`},
		{"3/0s", "0s is out of range: the duration is from 1ms to 24h"},
		{"3/-1m", "out of range"},
		{"3/25h", "out of range"},
		{"3/1us", "out of range"},
		{"3/1m/1s", `"1m/1s" is not a duration`},
		{"", "has no '/'"},
	}
	for _, b := range bad {
		if r, err := ParseRate(b.in); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ParseRate(%q) = %+v, %v; want an error containing %q", b.in, r, err, b.want)
		}
	}
}

const ratePolicy = `rate: 600/1h
tools:
  - match: "write_*"
    namespace: docs
    action: write
    rate: 10/1m
  - match: read_file
    namespace: docs
    action: read
resources:
  - match: "file:///srv/**"
    namespace: files
    action: read
    rate: 5/1s
prompts:
  - match: review
    namespace: prompts
    action: get
    rate: 2/30s
`

// The policy's rate and each rule's are read, and a rule's reaches the
// Call it maps a request to; a call no rated rule maps has none.
func TestRateInPolicy(t *testing.T) {
	p := mustParse(t, ratePolicy)
	if p.Rate != (Rate{600, time.Hour}) {
		t.Errorf("policy rate %+v", p.Rate)
	}
	check := func(what string, c Call, err error, want Rate) {
		t.Helper()
		if err != nil || c.Rate != want {
			t.Errorf("%s: %+v, %v; want rate %+v", what, c, err, want)
		}
	}
	c, err := p.Map("write_note", nil)
	check("write_note", c, err, Rate{10, time.Minute})
	c, err = p.Map("read_file", nil)
	check("read_file", c, err, Rate{})
	c, err = p.Map("other", nil)
	check("other", c, err, Rate{})
	c, err = p.MapResource("file:///srv/a")
	check("file:///srv/a", c, err, Rate{5, time.Second})
	c, err = p.MapResource("file:///etc/a")
	check("file:///etc/a", c, err, Rate{})
	c, err = p.MapPrompt("review", nil)
	check("review", c, err, Rate{2, 30 * time.Second})
}

// A bad rate is an error at its line, saying what to write.
func TestRateErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"rate: 30\n", "line 1: rate: must be N/DURATION, not a number alone: write 30/1m"},
		{"rate: [30, 1m]\n", "line 1: rate: must be N/DURATION, e.g. 30/1m"},
		{"rate: 30/m\n", "line 1: rate: \"m\" is not a duration: a duration starts with a number: write 30/1m"},
		{"tools:\n  - match: t\n    namespace: n\n    action: a\n    rate: 0/1m\n", "line 5: tools[0].rate: 0 calls would refuse every call"},
		{"resources:\n  - match: u\n    namespace: n\n    action: a\n    rate: 5/2d\n", "line 5: resources[0].rate: \"2d\" is not a duration: durations have no days: write 5/48h"},
		{"prompts:\n  - match: p\n    namespace: n\n    action: a\n    rate: 5/48h\n", "line 5: prompts[0].rate: 48h is out of range: the duration is from 1ms to 24h"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.src), "/d")
		var errs Errors
		if !errors.As(err, &errs) || len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tt.want) {
			t.Errorf("Parse(%q) = %v; want one error beginning %q", tt.src, err, tt.want)
		}
	}
}
