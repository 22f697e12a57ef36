package reputation

import (
	"math"
	"time"

	"github.com/delegateos/delegateos/internal/timestamp"
)

// Score computation parameters (§4).
const (
	// Alpha is the EWMA learning rate (§4.1).
	Alpha = 0.15
	// DecayRate is the decay per month (§4.3).
	DecayRate = 0.02
	// Month is the spec's average month of 30.44 days (§4.3).
	Month = 2630016 * time.Second
	// Baseline is the score decay moves every score toward (§4.3).
	Baseline = 0.5
	// ConfidenceStep is the weight of one sample in Confidence (§4.2).
	ConfidenceStep = 0.1
)

// Dimension is the stored state of one dimension or domain (§2.4). Score
// is the raw score: decay is applied when it is read (Decay), never stored.
type Dimension struct {
	Score      float64
	Confidence float64 // as stored: Confidence(SampleSize) rounded to 2 decimals
	SampleSize int
	LastSignal time.Time
}

// Confidence is 1 − 1/(1 + 0.1·n) for n samples (§4.2): how much data backs
// a score, not how good it is.
func Confidence(n int) float64 {
	if n <= 0 {
		return 0
	}
	return 1 - 1/(1+float64(n)*ConfidenceStep)
}

// MonthsBetween is the time from last to now in months of 30.44 days;
// never negative.
func MonthsBetween(last, now time.Time) float64 {
	d := now.Sub(last)
	if d <= 0 {
		return 0
	}
	return float64(d) / float64(Month)
}

// Decay returns score as it reads at now when its last signal was at last
// (§4.3). Above the baseline it is the spec's formula, score·e^(−rate·m)
// floored at 0.5, so its table holds (0.95 → 0.84 after 6 months, 0.50
// after 36). Below the baseline the spec's literal formula would drive a
// score toward 0, against its own rule that decay moves every score toward
// 0.5; the distance from 1 decays instead, 1 − (1 − score)·e^(−rate·m),
// capped at 0.5: the mirror image of the rule above.
func Decay(score float64, last, now time.Time) float64 {
	months := MonthsBetween(last, now)
	if months == 0 {
		return score
	}
	factor := math.Exp(-DecayRate * months)
	switch {
	case score > Baseline:
		return math.Max(Baseline, score*factor)
	case score < Baseline:
		return math.Min(Baseline, 1-(1-score)*factor)
	}
	return score
}

// Update folds a signal of the given score, observed at, into d (§4.1): the
// first sample sets the score; each later one is α·signal + (1 − α)·old,
// where old is d's score decayed up to at. Scores are stored rounded to 4
// decimals, confidence to 2.
func Update(d Dimension, score float64, at time.Time) Dimension {
	if d.SampleSize <= 0 {
		return Dimension{Score: round(score, 4), Confidence: round(Confidence(1), 2), SampleSize: 1, LastSignal: at}
	}
	old := Decay(d.Score, d.LastSignal, at)
	n := d.SampleSize + 1
	last := d.LastSignal
	if at.After(last) {
		last = at
	}
	return Dimension{
		Score:      round(Alpha*score+(1-Alpha)*old, 4),
		Confidence: round(Confidence(n), 2),
		SampleSize: n,
		LastSignal: last,
	}
}

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

// validScore reports whether x is a score: a number in [0, 1].
func validScore(x float64) bool { return x >= 0 && x <= 1 }

// truncate drops what a stored timestamp cannot hold (below a
// millisecond), so a value reads back as it was written.
func truncate(t time.Time) time.Time { return timestamp.Truncate(t) }
