package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/delegateos/delegateos/internal/strictjson"
)

// expectedResult is a deterministic_check's expectedResult: the
// CheckResult the check must return, member for member.
type expectedResult struct {
	Passed  *bool    `json:"passed"`
	Score   *float64 `json:"score"`
	Details *string  `json:"details"`
}

// parseExpected decodes an expectedResult strictly: an object with passed
// (required), score (in [0, 1]) and details (not empty); no other member,
// no null. A score or details that is absent must be absent from the
// result too, as in the reference's comparison of canonical JSON.
func parseExpected(raw json.RawMessage) (*expectedResult, error) {
	doc, err := decodeValue(raw)
	if err != nil {
		return nil, err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be an object, not %s", jsonType(doc))
	}
	for _, k := range sortedKeys(obj) {
		if obj[k] == nil {
			return nil, fmt.Errorf("member %q is null", k)
		}
	}
	var e expectedResult
	if err := strictjson.Unmarshal(raw, &e); err != nil {
		return nil, err
	}
	switch {
	case e.Passed == nil:
		return nil, errors.New("passed is required")
	case e.Score != nil && !validScore(*e.Score):
		return nil, errors.New("score must be in [0, 1]")
	case e.Details != nil && *e.Details == "":
		return nil, errors.New("details must not be empty (leave it out instead)")
	}
	return &e, nil
}

// matches reports whether r equals e member for member.
func (e *expectedResult) matches(r CheckResult) bool {
	if r.Passed != *e.Passed {
		return false
	}
	if (r.Score == nil) != (e.Score == nil) || (r.Score != nil && *r.Score != *e.Score) {
		return false
	}
	if e.Details == nil {
		return r.Details == ""
	}
	return r.Details == *e.Details
}

// evalCheck runs a deterministic_check (§10.3). With an expectedResult the
// step passes exactly when the check's whole result equals it, and its
// score becomes 1.0 or 0.0 accordingly: the check's own score described the
// check, not the comparison, and a weighted composite must not count a
// mismatch at the check's score.
func (r *run) evalCheck(s *Spec) (CheckResult, error) {
	fn, err := r.registry.Get(s.CheckName)
	if err != nil {
		return CheckResult{}, err
	}
	res, err := fn(r.output, s.CheckParams)
	if err != nil {
		return CheckResult{}, fmt.Errorf("%s: %w", s.CheckName, err)
	}
	if err := checkResult(res); err != nil {
		return CheckResult{}, fmt.Errorf("%s: %w", s.CheckName, err)
	}
	if len(s.ExpectedResult) == 0 {
		return res, nil
	}
	want, err := parseExpected(s.ExpectedResult)
	if err != nil {
		return CheckResult{}, specErr(r.path, "expectedResult: %v", err)
	}
	got, _ := json.Marshal(res)
	if want.matches(res) {
		return passFail(true, "result matches expectedResult: "+string(got)), nil
	}
	return passFail(false, fmt.Sprintf("result %s does not match expectedResult %s", got, compact(s.ExpectedResult))), nil
}

// compact is raw JSON without insignificant whitespace.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
