package verify

import (
	"fmt"
	"strings"
)

// evalComposite runs a composite (§6.4, §10.3). all_pass stops at the
// first failed step; majority and weighted run every step.
func (r *run) evalComposite(s *Spec) (CheckResult, error) {
	results := make([]CheckResult, 0, len(s.Steps))
	for i := range s.Steps {
		res, err := r.step(&s.Steps[i], fmt.Sprintf("%s.steps[%d]", r.path, i))
		if err != nil {
			return CheckResult{}, err
		}
		if s.Mode == ModeAllPass && !res.Passed {
			details := res.Details
			if details == "" {
				details = "no details"
			}
			return passFail(false, fmt.Sprintf("Step %d failed: %s", i, details)), nil
		}
		results = append(results, res)
	}
	switch s.Mode {
	case ModeAllPass:
		return passFail(true, ""), nil
	case ModeMajority:
		return majority(results), nil
	case ModeWeighted:
		return weighted(results, s.Weights, s.PassThreshold), nil
	}
	return CheckResult{}, specErr(r.path, "unknown mode %q", s.Mode)
}

// majority passes when more than half of the steps passed; a tie fails.
// The score is the fraction that passed.
func majority(results []CheckResult) CheckResult {
	n := 0
	var failed []string
	for i, res := range results {
		if res.Passed {
			n++
		} else {
			failed = append(failed, fmt.Sprint(i))
		}
	}
	res := CheckResult{Passed: 2*n > len(results), Score: score(float64(n) / float64(len(results)))}
	res.Details = fmt.Sprintf("%d of %d steps passed", n, len(results))
	if len(failed) > 0 {
		res.Details += "; failed: " + strings.Join(failed, ", ")
	}
	return res
}

// weighted passes when Σ weights[i]·score[i] ≥ threshold, a step without a
// score counting 1.0 if it passed and 0.0 if not. Weights were checked by
// Validate (≥ 0, summing to 1 ± WeightTolerance), so the sum can exceed 1
// only by rounding and the tolerance; the reported score is capped at 1.
func weighted(results []CheckResult, weights []float64, threshold *float64) CheckResult {
	t := DefaultPassThreshold
	if threshold != nil {
		t = *threshold
	}
	sum := 0.0
	for i, res := range results {
		sum += weights[i] * scoreOf(res)
	}
	return CheckResult{
		Passed:  sum >= t,
		Score:   score(min(sum, 1)),
		Details: fmt.Sprintf("weighted score %s, threshold %s", formatScore(sum), formatScore(t)),
	}
}
