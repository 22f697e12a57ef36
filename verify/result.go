package verify

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// CheckResult is the outcome of a check, a composite or a judgement
// (DelegateOS §6.2). Score, when present, is in [0, 1].
type CheckResult struct {
	Passed  bool     `json:"passed"`
	Score   *float64 `json:"score,omitempty"`
	Details string   `json:"details,omitempty"`
}

// score returns a pointer to s, for CheckResult.Score.
func score(s float64) *float64 { return &s }

// passFail is the result of a yes/no check: score 1.0 or 0.0, as every
// built-in reports.
func passFail(passed bool, details string) CheckResult {
	if passed {
		return CheckResult{Passed: true, Score: score(1)}
	}
	return CheckResult{Passed: false, Score: score(0), Details: details}
}

// validScore reports whether s is a finite number in [0, 1]; NaN fails
// both comparisons.
func validScore(s float64) bool { return s >= 0 && s <= 1 }

// checkResult refuses a result whose score is NaN, infinite or outside
// [0, 1], whoever produced it.
func checkResult(r CheckResult) error {
	if r.Score != nil && !validScore(*r.Score) {
		return fmt.Errorf("%w: score %v is not in [0, 1]", ErrBadResult, *r.Score)
	}
	return nil
}

// scoreOf is a result's score, or 1.0/0.0 by whether it passed (§6.4).
func scoreOf(r CheckResult) float64 {
	if r.Score != nil {
		return *r.Score
	}
	if r.Passed {
		return 1
	}
	return 0
}

// truncate cuts s to at most n bytes at a UTF-8 boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// formatScore writes a score the way JavaScript would print it.
func formatScore(s float64) string {
	if s == math.Trunc(s) {
		return fmt.Sprintf("%.0f", s)
	}
	return fmt.Sprintf("%g", s)
}
