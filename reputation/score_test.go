package reputation

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// The table of §4.3: decay factor and a 0.95 score after decay, to the
// spec's precision.
func TestDecaySpecTable(t *testing.T) {
	for _, row := range []struct {
		months      int
		factor, got string
	}{
		{0, "1.000", "0.95"},
		{6, "0.887", "0.84"},
		{12, "0.787", "0.75"},
		{24, "0.619", "0.59"},
		{36, "0.487", "0.50"},
	} {
		now := t0.Add(time.Duration(row.months) * Month)
		if f := fmt.Sprintf("%.3f", math.Exp(-DecayRate*MonthsBetween(t0, now))); f != row.factor {
			t.Errorf("%d months: factor %s, want %s", row.months, f, row.factor)
		}
		if s := fmt.Sprintf("%.2f", Decay(0.95, t0, now)); s != row.got {
			t.Errorf("%d months: 0.95 decays to %s, want %s", row.months, s, row.got)
		}
	}
	// 36 months is the floor, not the formula's 0.46.
	if got := Decay(0.95, t0, t0.Add(36*Month)); got != Baseline {
		t.Errorf("after 36 months: %v, want the floor 0.5", got)
	}
}

func TestMonthIs3044Days(t *testing.T) {
	if Month != time.Duration(30.44*24*float64(time.Hour)) {
		t.Fatalf("Month = %v", Month)
	}
	if m := MonthsBetween(t0, t0.Add(Month)); m != 1 {
		t.Fatalf("one Month is %v months", m)
	}
}

// Below 0.5 decay mirrors the rule above it: scores rise toward 0.5 and
// never cross it (the spec's literal formula would lower them).
func TestDecayBelowBaselineMirrors(t *testing.T) {
	for _, score := range []float64{0, 0.05, 0.3, 0.49} {
		prev := score
		for months := 1; months <= 600; months *= 2 {
			now := t0.Add(time.Duration(months) * Month)
			got := Decay(score, t0, now)
			want := math.Min(0.5, 1-(1-score)*math.Exp(-DecayRate*float64(months)))
			if math.Abs(got-want) > 1e-12 {
				t.Fatalf("Decay(%v, %d months) = %v, want %v", score, months, got, want)
			}
			if got < prev || got > Baseline {
				t.Fatalf("Decay(%v, %d months) = %v: not moving toward 0.5 (previous %v)", score, months, got, prev)
			}
			prev = got
		}
		if prev != Baseline {
			t.Errorf("Decay(%v) after 50 years = %v, want 0.5", score, prev)
		}
	}
	// The mirror: 0.05 after 12 months is as far below 0.5... as 0.95 is
	// above it before its floor applies: 1 − Decay(1 − s).
	now := t0.Add(12 * Month)
	if a, b := Decay(0.05, t0, now), 1-Decay(0.95, t0, now); math.Abs(a-b) > 1e-12 {
		t.Errorf("Decay(0.05) = %v, 1 − Decay(0.95) = %v; want the mirror image", a, b)
	}
	if got := Decay(0.5, t0, now); got != 0.5 {
		t.Errorf("Decay(0.5) = %v", got)
	}
}

// A read before the last signal (clock skew) never decays or grows.
func TestDecayNotBeforeLastSignal(t *testing.T) {
	for _, s := range []float64{0.1, 0.9} {
		if got := Decay(s, t0, t0.Add(-Month)); got != s {
			t.Errorf("Decay(%v) one month before the signal = %v", s, got)
		}
	}
}

// The table of §4.2.
func TestConfidenceSpecTable(t *testing.T) {
	for n, want := range map[int]string{0: "0.00", 1: "0.09", 5: "0.33", 10: "0.50", 20: "0.67", 50: "0.83", 100: "0.91"} {
		if got := fmt.Sprintf("%.2f", Confidence(n)); got != want {
			t.Errorf("Confidence(%d) = %s, want %s", n, got, want)
		}
	}
	if Confidence(-3) != 0 {
		t.Error("negative sample sizes must have no confidence")
	}
}

func TestUpdateEWMA(t *testing.T) {
	// The first signal sets the score (Appendix A.1: 0.90, confidence 0.09).
	d := Update(Dimension{}, 0.9, t0)
	if d != (Dimension{Score: 0.9, Confidence: 0.09, SampleSize: 1, LastSignal: t0}) {
		t.Fatalf("first signal: %+v", d)
	}
	// Twelve months later the old score has decayed to 0.9·e^(−0.24)
	// before the new signal is weighed in with α = 0.15.
	at := t0.Add(12 * Month)
	d2 := Update(d, 0.2, at)
	want := 0.15*0.2 + 0.85*(0.9*math.Exp(-0.24))
	if math.Abs(d2.Score-want) > 0.00005 || d2.SampleSize != 2 || d2.LastSignal != at || d2.Confidence != 0.17 {
		t.Fatalf("second signal: %+v, want score %.4f", d2, want)
	}
	// Without the decay step the score would be 0.795.
	if math.Abs(d2.Score-(0.15*0.2+0.85*0.9)) < 0.01 {
		t.Fatal("the old score was not decayed before the update")
	}
	// A signal older than the last one does not move lastSignal back.
	d3 := Update(d2, 1, t0)
	if d3.LastSignal != at {
		t.Fatalf("lastSignal moved back to %v", d3.LastSignal)
	}
}

// An agent with no signals has no score: unknown, not 0 or 0.5.
func TestNoSignalsIsUnknown(t *testing.T) {
	p := &Profile{Slug: "x", Dimensions: map[string]Dimension{"coordination": {SampleSize: 0, Score: 0.7}}}
	for _, v := range []View{p.Score(Reliability, t0), p.Score("coordination", t0), p.DomainScore("law", t0)} {
		if v.Known || v.Score != 0 || v.Confidence != 0 || v.SampleSize != 0 {
			t.Errorf("%s: %+v, want unknown", v.Name, v)
		}
	}
}

// Reading at a time before the last signal replays the signals up to it.
func TestViewReplaysThePast(t *testing.T) {
	p := &Profile{Slug: "x"}
	src := "did:key:z6Mkon3Necd6NkkyfoGoHxid2znGc59LU3K7mubaRcFbLfLX"
	p.apply(sig(src, 0.9, t0))
	p.apply(sig(src, 0.1, t0.Add(2*Month)))
	p.apply(sig(src, 0.1, t0.Add(4*Month)))
	now := p.Score(Reliability, t0.Add(4*Month))
	if now.Replayed || now.SampleSize != 3 {
		t.Fatalf("now: %+v", now)
	}
	past := p.Score(Reliability, t0.Add(Month))
	if !past.Replayed || past.SampleSize != 1 || past.Raw != 0.9 || past.Score != Decay(0.9, t0, t0.Add(Month)) {
		t.Fatalf("one month in: %+v", past)
	}
	before := p.Score(Reliability, t0.Add(-time.Hour))
	if before.Known {
		t.Fatalf("before the first signal: %+v, want unknown", before)
	}
}
