package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Rate is a rate limit: at most N calls in any window of length Per,
// wherever the window starts. The zero Rate sets no limit.
type Rate struct {
	N   int
	Per time.Duration
}

// IsZero reports whether r sets no limit.
func (r Rate) IsZero() bool { return r == Rate{} }

// String writes r as a policy file does, e.g. 30/1m; "" for the zero Rate.
func (r Rate) String() string {
	if r.IsZero() {
		return ""
	}
	d := r.Per.String()
	d = strings.Replace(d, "m0s", "m", 1)
	d = strings.Replace(d, "h0m", "h", 1)
	return strconv.Itoa(r.N) + "/" + d
}

// ParseRate reads a rate as a policy file writes it: N/DURATION, where N is
// a whole number of calls from 1 to MaxRateCalls and DURATION a Go
// duration (1s, 1m, 1h, 1h30m, 500ms) from MinRatePer to MaxRatePer. The
// error says what to write instead.
func ParseRate(s string) (Rate, error) {
	const form = "write N/DURATION, e.g. 30/1m for at most 30 calls in any minute"
	ns, ds, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, fmt.Errorf("%q has no '/': %s", s, form)
	}
	n, err := strconv.Atoi(ns)
	switch {
	case err != nil || ns != strconv.Itoa(n):
		return Rate{}, fmt.Errorf("%q is not a whole number of calls: %s", ns, form)
	case n == 0:
		return Rate{}, errors.New("0 calls would refuse every call; to refuse a call, grant no token the capability it needs; a rate allows 1 or more")
	case n < 0 || n > MaxRateCalls:
		return Rate{}, fmt.Errorf("%d calls is out of range: N is from 1 to %d", n, MaxRateCalls)
	}
	per, err := time.ParseDuration(ds)
	if err != nil {
		return Rate{}, fmt.Errorf("%q is not a duration: %s", ds, durationHint(ns, ds))
	}
	if per < MinRatePer || per > MaxRatePer {
		return Rate{}, fmt.Errorf("%s is out of range: the duration is from %s to %s", ds, MinRatePer, Rate{N: 1, Per: MaxRatePer}.String()[2:])
	}
	return Rate{N: n, Per: per}, nil
}

// durationHint says how to write a duration someone got wrong: a unit
// without a number (m), a unit spelt out (min, hours), or days (2d).
func durationHint(n, d string) string {
	const generic = "write a Go duration with its unit, such as 1s, 1m, 1h or 1h30m"
	i := strings.IndexFunc(d, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		return generic
	}
	num, unit := d[:i], strings.ToLower(d[i:])
	if num == "" {
		if _, err := time.ParseDuration("1" + d); err == nil {
			return fmt.Sprintf("a duration starts with a number: write %s/1%s", n, d)
		}
		num = "1"
	}
	units := map[string]string{"sec": "s", "secs": "s", "second": "s", "seconds": "s", "min": "m", "mins": "m",
		"minute": "m", "minutes": "m", "hr": "h", "hrs": "h", "hour": "h", "hours": "h"}
	if u, ok := units[unit]; ok {
		if _, err := time.ParseDuration(num + u); err == nil {
			return fmt.Sprintf("write %s/%s%s", n, num, u)
		}
	}
	if unit == "d" || unit == "day" || unit == "days" {
		if k, err := strconv.Atoi(num); err == nil && k > 0 && k < 1000 {
			return fmt.Sprintf("durations have no days: write %s/%dh", n, 24*k)
		}
	}
	return generic
}

// rate reads a rate value.
func (ps *parser) rate(n *yaml.Node, key string) Rate {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
			ps.errorf(n, key, "must be N/DURATION, not a number alone: write %s/1m for at most %s calls in any minute", n.Value, n.Value)
			return Rate{}
		}
		ps.errorf(n, key, "must be N/DURATION, e.g. 30/1m for at most 30 calls in any minute")
		return Rate{}
	}
	r, err := ParseRate(n.Value)
	if err != nil {
		ps.errorf(n, key, "%v", err)
		return Rate{}
	}
	return r
}
