package verify

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/delegateos/delegateos/internal/strictjson"
)

// The verification methods: §6.1 and the v0.2 additions of §6.5 and §6.6.
const (
	MethodSchemaMatch        = "schema_match"
	MethodDeterministicCheck = "deterministic_check"
	MethodComposite          = "composite"
	MethodLLMJudge           = "llm_judge"
	MethodHumanReview        = "human_review"
)

// The composite modes of §6.4.
const (
	ModeAllPass  = "all_pass"
	ModeMajority = "majority"
	ModeWeighted = "weighted"
)

// Spec is a VerificationSpec (§6.1 plus the v0.2 llm_judge and human_review
// methods). Each method uses some members; a member a method does not use
// is an error, not ignored.
type Spec struct {
	// Method is one of the Method* constants.
	Method string `json:"method"`

	// Schema is schema_match's draft-07 JSON Schema.
	Schema json.RawMessage `json:"schema,omitempty"`

	// CheckName names deterministic_check's function in the Registry.
	CheckName string `json:"checkName,omitempty"`
	// CheckParams is passed to the check function as written.
	CheckParams json.RawMessage `json:"checkParams,omitempty"`
	// ExpectedResult, when present, is the CheckResult the check must
	// return: an object with passed (required), score and details. See
	// doc.go for how it is compared.
	ExpectedResult json.RawMessage `json:"expectedResult,omitempty"`

	// Steps are composite's sub-specs, run in order.
	Steps []Spec `json:"steps,omitempty"`
	// Mode is composite's mode, one of the Mode* constants.
	Mode string `json:"mode,omitempty"`
	// Weights are weighted mode's weights, one per step, each ≥ 0,
	// summing to 1 ± WeightTolerance.
	Weights []float64 `json:"weights,omitempty"`
	// PassThreshold is in [0, 1]: weighted mode's threshold (default
	// DefaultPassThreshold), and llm_judge's and human_review's (required).
	PassThreshold *float64 `json:"passThreshold,omitempty"`

	// JudgeModel is llm_judge's model (default DefaultJudgeModel).
	JudgeModel string `json:"judgeModel,omitempty"`
	// JudgeTemperature is in [0, MaxJudgeTemperature] (default 0).
	JudgeTemperature *float64 `json:"judgeTemperature,omitempty"`
	// JudgePrompt is llm_judge's rubric; it must contain the {output} and
	// {contract} placeholders.
	JudgePrompt string `json:"judgePrompt,omitempty"`
	// Evaluations is the number of judge calls, odd, 1–MaxEvaluations
	// (default DefaultEvaluations).
	Evaluations *int `json:"evaluations,omitempty"`

	// TimeoutMs is how long human_review waits for the reviewer before it
	// escalates to llm_judge, 1 ms to MaxReviewTimeout. Absent, the
	// Verifier's ReviewTimeout applies.
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
}

// ParseSpec decodes a spec strictly (no duplicate, unknown or differently
// cased members; valid UTF-8; at most MaxSpecLen bytes) and validates it.
func ParseSpec(data []byte) (*Spec, error) {
	if len(data) > MaxSpecLen {
		return nil, specErr("spec", "longer than %d bytes", MaxSpecLen)
	}
	var s Spec
	if err := strictjson.Unmarshal(data, &s); err != nil {
		return nil, specErr("spec", "%v", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks the whole spec tree: methods and modes, required and
// unused members, ranges, nesting (MaxSpecDepth, MaxSpecNodes), and that
// JSON members are bounded JSON; schema_match's schema is compiled. It does
// not look check names up (the Registry is Verify's) nor check params,
// which each check function decodes. Errors are *SpecError.
func (s *Spec) Validate() error {
	nodes := 0
	return s.validate("spec", 1, &nodes)
}

func (s *Spec) validate(path string, depth int, nodes *int) error {
	if depth > MaxSpecDepth {
		return specErr(path, "composites nested deeper than %d", MaxSpecDepth)
	}
	if *nodes++; *nodes > MaxSpecNodes {
		return specErr(path, "more than %d specs in one tree", MaxSpecNodes)
	}
	if err := s.checkMembers(path); err != nil {
		return err
	}
	switch s.Method {
	case MethodSchemaMatch:
		if len(s.Schema) == 0 {
			return specErr(path, "schema is required")
		}
		if _, err := compileSchema(s.Schema); err != nil {
			return specErr(path, "%v", err)
		}
	case MethodDeterministicCheck:
		return s.validateCheck(path)
	case MethodComposite:
		return s.validateComposite(path, depth, nodes)
	case MethodLLMJudge, MethodHumanReview:
		return s.validateJudge(path)
	}
	return nil
}

// members reports which members are set, by JSON name.
func (s *Spec) members() map[string]bool {
	return map[string]bool{
		"schema":           len(s.Schema) > 0,
		"checkName":        s.CheckName != "",
		"checkParams":      len(s.CheckParams) > 0,
		"expectedResult":   len(s.ExpectedResult) > 0,
		"steps":            s.Steps != nil,
		"mode":             s.Mode != "",
		"weights":          s.Weights != nil,
		"passThreshold":    s.PassThreshold != nil,
		"judgeModel":       s.JudgeModel != "",
		"judgeTemperature": s.JudgeTemperature != nil,
		"judgePrompt":      s.JudgePrompt != "",
		"evaluations":      s.Evaluations != nil,
		"timeoutMs":        s.TimeoutMs != nil,
	}
}

// judgeMembers are llm_judge's members; human_review has them too, for its
// escalation.
var judgeMembers = []string{"passThreshold", "judgeModel", "judgeTemperature", "judgePrompt", "evaluations"}

// methodMembers lists the members each method may use.
var methodMembers = map[string][]string{
	MethodSchemaMatch:        {"schema"},
	MethodDeterministicCheck: {"checkName", "checkParams", "expectedResult"},
	MethodComposite:          {"steps", "mode", "weights", "passThreshold"},
	MethodLLMJudge:           judgeMembers,
	MethodHumanReview:        append([]string{"timeoutMs"}, judgeMembers...),
}

func (s *Spec) checkMembers(path string) error {
	allowed, ok := methodMembers[s.Method]
	if !ok {
		return specErr(path, "unknown method %q", truncate(s.Method, 64))
	}
	set := s.members()
	for _, name := range sortedMemberNames(set) {
		if set[name] && !slices.Contains(allowed, name) {
			return specErr(path, "member %q is not used by method %s", name, s.Method)
		}
	}
	return nil
}

func sortedMemberNames(m map[string]bool) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func (s *Spec) validateCheck(path string) error {
	if s.CheckName == "" {
		return specErr(path, "checkName is required")
	}
	if err := validCheckName(s.CheckName); err != nil {
		return specErr(path, "%v", err)
	}
	if len(s.CheckParams) > 0 {
		if _, err := decodeValue(s.CheckParams); err != nil {
			return specErr(path, "checkParams: %v", err)
		}
	}
	if len(s.ExpectedResult) > 0 {
		if _, err := parseExpected(s.ExpectedResult); err != nil {
			return specErr(path, "expectedResult: %v", err)
		}
	}
	return nil
}

func (s *Spec) validateComposite(path string, depth int, nodes *int) error {
	if len(s.Steps) == 0 {
		return specErr(path, "steps must not be empty")
	}
	if len(s.Steps) > MaxSteps {
		return specErr(path, "more than %d steps", MaxSteps)
	}
	switch s.Mode {
	case ModeAllPass, ModeMajority:
		for _, m := range []string{"weights", "passThreshold"} {
			if s.members()[m] {
				return specErr(path, "%s is only used by weighted mode", m)
			}
		}
	case ModeWeighted:
		if err := checkWeights(s.Weights, len(s.Steps)); err != nil {
			return specErr(path, "%v", err)
		}
		if s.PassThreshold != nil && !validScore(*s.PassThreshold) {
			return specErr(path, "passThreshold must be in [0, 1]")
		}
	case "":
		return specErr(path, "mode is required")
	default:
		return specErr(path, "unknown mode %q", truncate(s.Mode, 64))
	}
	for i := range s.Steps {
		if err := s.Steps[i].validate(fmt.Sprintf("%s.steps[%d]", path, i), depth+1, nodes); err != nil {
			return err
		}
	}
	return nil
}

// checkWeights: one weight per step, each finite and ≥ 0, summing (in
// order, as the reference sums) to 1 ± WeightTolerance.
func checkWeights(w []float64, steps int) error {
	if len(w) != steps {
		return fmt.Errorf("weighted mode needs %d weights (one per step), got %d", steps, len(w))
	}
	sum := 0.0
	for i, x := range w {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return fmt.Errorf("weights[%d] = %v: weights must be finite and not negative", i, x)
		}
		sum += x
	}
	if math.Abs(sum-1) > WeightTolerance {
		return fmt.Errorf("weights sum to %v, not 1 ± %v", sum, WeightTolerance)
	}
	return nil
}

func (s *Spec) validateJudge(path string) error {
	switch {
	case s.JudgePrompt == "":
		return specErr(path, "judgePrompt is required")
	case len(s.JudgePrompt) > MaxJudgePromptLen:
		return specErr(path, "judgePrompt longer than %d bytes", MaxJudgePromptLen)
	case !strings.Contains(s.JudgePrompt, "{output}") || !strings.Contains(s.JudgePrompt, "{contract}"):
		return specErr(path, "judgePrompt must contain the {output} and {contract} placeholders")
	case s.PassThreshold == nil:
		return specErr(path, "passThreshold is required")
	case !validScore(*s.PassThreshold):
		return specErr(path, "passThreshold must be in [0, 1]")
	case len(s.JudgeModel) > MaxJudgeModelLen:
		return specErr(path, "judgeModel longer than %d bytes", MaxJudgeModelLen)
	case s.JudgeTemperature != nil && !(*s.JudgeTemperature >= 0 && *s.JudgeTemperature <= MaxJudgeTemperature):
		return specErr(path, "judgeTemperature must be in [0, %v]", MaxJudgeTemperature)
	case s.Evaluations != nil && (*s.Evaluations < 1 || *s.Evaluations > MaxEvaluations || *s.Evaluations%2 == 0):
		return specErr(path, "evaluations must be odd, 1 to %d", MaxEvaluations)
	case s.TimeoutMs != nil && (*s.TimeoutMs < 1 || *s.TimeoutMs > MaxReviewTimeout.Milliseconds()):
		return specErr(path, "timeoutMs must be 1 to %d", MaxReviewTimeout.Milliseconds())
	}
	for _, c := range s.JudgeModel {
		if c < 0x20 || c == 0x7f {
			return specErr(path, "judgeModel has a control character")
		}
	}
	return nil
}

// judgeModel, judgeTemperature and evaluations apply the defaults.
func (s *Spec) judgeModel() string {
	if s.JudgeModel == "" {
		return DefaultJudgeModel
	}
	return s.JudgeModel
}

func (s *Spec) judgeTemperature() float64 {
	if s.JudgeTemperature == nil {
		return 0
	}
	return *s.JudgeTemperature
}

func (s *Spec) evaluations() int {
	if s.Evaluations == nil {
		return DefaultEvaluations
	}
	return *s.Evaluations
}

// reviewTimeout is the spec's timeoutMs, or def.
func (s *Spec) reviewTimeout(def time.Duration) time.Duration {
	if s.TimeoutMs != nil {
		return time.Duration(*s.TimeoutMs) * time.Millisecond
	}
	return def
}
