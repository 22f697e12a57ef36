package verify

import (
	"context"
	"encoding/json"
	"math"
	"sync/atomic"
	"testing"
)

// mustSpec parses a spec that the test expects to be valid.
func mustSpec(t testing.TB, s string) *Spec {
	t.Helper()
	spec, err := ParseSpec([]byte(s))
	if err != nil {
		t.Fatalf("ParseSpec(%s): %v", s, err)
	}
	return spec
}

// verifyJSON runs Verify with v on a spec and an output given as JSON text.
func verifyJSON(t testing.TB, v *Verifier, spec, output string) (CheckResult, error) {
	t.Helper()
	return v.Verify(context.Background(), mustSpec(t, spec), Task{Title: "T", Description: "D"}, json.RawMessage(output))
}

// checkSpec is a deterministic_check spec.
func checkSpec(name, params string) string {
	s := `{"method":"deterministic_check","checkName":"` + name + `"`
	if params != "" {
		s += `,"checkParams":` + params
	}
	return s + "}"
}

// counter is a check function that counts its calls and returns a fixed
// result.
type counter struct {
	calls atomic.Int64
	res   CheckResult
}

func (c *counter) fn(any, json.RawMessage) (CheckResult, error) {
	c.calls.Add(1)
	return c.res, nil
}

// scriptedJudge answers with the given scores in turn and records the
// requests.
type scriptedJudge struct {
	scores []float64
	reqs   []JudgeRequest
	err    error
}

func (j *scriptedJudge) Judge(_ context.Context, req JudgeRequest) (JudgeResponse, error) {
	if j.err != nil {
		return JudgeResponse{}, j.err
	}
	s := j.scores[len(j.reqs)%len(j.scores)]
	j.reqs = append(j.reqs, req)
	return JudgeResponse{Score: s, Reasoning: "scored " + formatScore(s)}, nil
}

func scoreVal(r CheckResult) float64 {
	if r.Score == nil {
		return -1
	}
	return *r.Score
}

const judgeSpec = `{"method":"llm_judge","judgePrompt":"Is {output} what {contract} asks?","passThreshold":0.7}`

func mathNaN() float64 { return math.NaN() }
func mathInf() float64 { return math.Inf(1) }
