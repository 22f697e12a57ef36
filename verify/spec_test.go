package verify

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseSpecValid(t *testing.T) {
	for _, s := range []string{
		`{"method":"schema_match","schema":{"type":"string"}}`,
		`{"method":"schema_match","schema":true}`,
		`{"method":"deterministic_check","checkName":"regex_match","checkParams":{"pattern":"a"}}`,
		`{"method":"deterministic_check","checkName":"custom.check-1:x"}`,
		`{"method":"deterministic_check","checkName":"exit_code","checkParams":{"expected":0},"expectedResult":{"passed":false,"score":0}}`,
		`{"method":"composite","mode":"all_pass","steps":[{"method":"schema_match","schema":{}}]}`,
		`{"method":"composite","mode":"majority","steps":[{"method":"schema_match","schema":{}},{"method":"schema_match","schema":{}}]}`,
		`{"method":"composite","mode":"weighted","weights":[0.3,0.7],"steps":[{"method":"schema_match","schema":{}},{"method":"schema_match","schema":{}}]}`,
		`{"method":"composite","mode":"weighted","weights":[0.3334,0.3333,0.3333],"passThreshold":1,"steps":[{"method":"schema_match","schema":{}},{"method":"schema_match","schema":{}},{"method":"schema_match","schema":{}}]}`,
		`{"method":"composite","mode":"weighted","weights":[1,0],"steps":[{"method":"schema_match","schema":{}},{"method":"schema_match","schema":{}}]}`,
		judgeSpec,
		`{"method":"llm_judge","judgePrompt":"{contract}{output}","passThreshold":0,"judgeModel":"m","judgeTemperature":2,"evaluations":15}`,
		`{"method":"human_review","judgePrompt":"{contract}{output}","passThreshold":1,"timeoutMs":1}`,
		`{"method":"human_review","judgePrompt":"{contract}{output}","passThreshold":0.5,"evaluations":1,"timeoutMs":2592000000}`,
	} {
		spec, err := ParseSpec([]byte(s))
		if err != nil {
			t.Errorf("ParseSpec(%s): %v", s, err)
			continue
		}
		// A valid spec survives a round trip through JSON.
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSpec(b); err != nil {
			t.Errorf("round trip of %s: %s: %v", s, b, err)
		}
	}
}

func TestParseSpecInvalid(t *testing.T) {
	step := `{"method":"schema_match","schema":{}}`
	nest := func(depth int) string {
		s := step
		for range depth {
			s = `{"method":"composite","mode":"all_pass","steps":[` + s + `]}`
		}
		return s
	}
	manySteps := func(n int) string {
		return `{"method":"composite","mode":"all_pass","steps":[` + strings.Repeat(step+",", n-1) + step + `]}`
	}
	for _, c := range []struct{ name, spec, want string }{
		{"empty", ``, "spec"},
		{"not an object", `[]`, "spec"},
		{"no method", `{}`, "unknown method"},
		{"unknown method", `{"method":"magic"}`, "unknown method"},
		{"method case", `{"method":"Schema_Match","schema":{}}`, "unknown method"},
		{"duplicate member", `{"method":"schema_match","schema":{},"schema":{}}`, "duplicate"},
		{"recased member", `{"Method":"schema_match","schema":{}}`, "unknown member"},
		{"unknown member", `{"method":"schema_match","schema":{},"extra":1}`, "unknown member"},
		{"trailing data", `{"method":"schema_match","schema":{}} {}`, "trailing"},
		{"invalid UTF-8", "{\"method\":\"schema_match\",\"schema\":{\"title\":\"\xff\"}}", "UTF-8"},
		{"too long", `{"method":"schema_match","schema":{"description":"` + strings.Repeat("a", MaxSpecLen) + `"}}`, "longer than"},
		{"schema missing", `{"method":"schema_match"}`, "schema is required"},
		{"schema invalid", `{"method":"schema_match","schema":{"type":"strin"}}`, "schema"},
		{"schema unknown keyword", `{"method":"schema_match","schema":{"typo":1}}`, "unknown keyword"},
		{"schema external ref", `{"method":"schema_match","schema":{"$ref":"https://example.com/s.json"}}`, "only references inside"},
		{"schema huge exponent", `{"method":"schema_match","schema":{"maximum":1e999}}`, "exponent"},
		{"unused member", `{"method":"schema_match","schema":{},"checkName":"x"}`, `"checkName" is not used`},
		{"check name missing", `{"method":"deterministic_check"}`, "checkName is required"},
		{"check name bad", `{"method":"deterministic_check","checkName":"a b"}`, "only ASCII"},
		{"check name long", `{"method":"deterministic_check","checkName":"` + strings.Repeat("a", MaxCheckNameLen+1) + `"}`, "1 to"},
		{"check params bad number", `{"method":"deterministic_check","checkName":"x","checkParams":{"a":1e401}}`, "exponent"},
		{"expected not object", `{"method":"deterministic_check","checkName":"x","expectedResult":true}`, "must be an object"},
		{"expected null", `{"method":"deterministic_check","checkName":"x","expectedResult":null}`, "must be an object"},
		{"expected no passed", `{"method":"deterministic_check","checkName":"x","expectedResult":{"score":1}}`, "passed is required"},
		{"expected null member", `{"method":"deterministic_check","checkName":"x","expectedResult":{"passed":true,"score":null}}`, "is null"},
		{"expected unknown member", `{"method":"deterministic_check","checkName":"x","expectedResult":{"passed":true,"extra":1}}`, "unknown member"},
		{"expected bad score", `{"method":"deterministic_check","checkName":"x","expectedResult":{"passed":true,"score":1.5}}`, "score must be"},
		{"expected empty details", `{"method":"deterministic_check","checkName":"x","expectedResult":{"passed":true,"details":""}}`, "details must not be empty"},
		{"expected passed string", `{"method":"deterministic_check","checkName":"x","expectedResult":{"passed":"true"}}`, "cannot unmarshal"},
		{"composite no mode", `{"method":"composite","steps":[` + step + `]}`, "mode is required"},
		{"composite bad mode", `{"method":"composite","mode":"any","steps":[` + step + `]}`, "unknown mode"},
		{"composite empty steps", `{"method":"composite","mode":"all_pass","steps":[]}`, "must not be empty"},
		{"composite no steps", `{"method":"composite","mode":"all_pass"}`, "must not be empty"},
		{"composite too many steps", manySteps(MaxSteps + 1), "more than"},
		{"composite too deep", nest(MaxSpecDepth), "nested deeper"},
		{"composite bad step", `{"method":"composite","mode":"all_pass","steps":[` + step + `,{"method":"nope"}]}`, "spec.steps[1]"},
		{"weights in all_pass", `{"method":"composite","mode":"all_pass","weights":[1],"steps":[` + step + `]}`, "only used by weighted"},
		{"threshold in majority", `{"method":"composite","mode":"majority","passThreshold":0.5,"steps":[` + step + `]}`, "only used by weighted"},
		{"weights missing", `{"method":"composite","mode":"weighted","steps":[` + step + `]}`, "needs 1 weights"},
		{"weights too few", `{"method":"composite","mode":"weighted","weights":[1],"steps":[` + step + `,` + step + `]}`, "needs 2 weights"},
		{"weights too many", `{"method":"composite","mode":"weighted","weights":[0.5,0.5],"steps":[` + step + `]}`, "needs 1 weights"},
		{"weights sum low", `{"method":"composite","mode":"weighted","weights":[0.5,0.498],"steps":[` + step + `,` + step + `]}`, "sum to"},
		{"weights sum high", `{"method":"composite","mode":"weighted","weights":[0.5,0.502],"steps":[` + step + `,` + step + `]}`, "sum to"},
		{"weights negative", `{"method":"composite","mode":"weighted","weights":[1.5,-0.5],"steps":[` + step + `,` + step + `]}`, "not negative"},
		{"weights string", `{"method":"composite","mode":"weighted","weights":["1"],"steps":[` + step + `]}`, "cannot unmarshal"},
		{"weights overflow", `{"method":"composite","mode":"weighted","weights":[1e309],"steps":[` + step + `]}`, "spec"},
		{"weighted threshold high", `{"method":"composite","mode":"weighted","weights":[1],"passThreshold":1.01,"steps":[` + step + `]}`, "passThreshold must be"},
		{"weighted threshold negative", `{"method":"composite","mode":"weighted","weights":[1],"passThreshold":-0.1,"steps":[` + step + `]}`, "passThreshold must be"},
		{"judge no prompt", `{"method":"llm_judge","passThreshold":0.5}`, "judgePrompt is required"},
		{"judge no output placeholder", `{"method":"llm_judge","judgePrompt":"{contract}","passThreshold":0.5}`, "placeholders"},
		{"judge no contract placeholder", `{"method":"llm_judge","judgePrompt":"{output}","passThreshold":0.5}`, "placeholders"},
		{"judge prompt long", `{"method":"llm_judge","judgePrompt":"{output}{contract}` + strings.Repeat("a", MaxJudgePromptLen) + `","passThreshold":0.5}`, "longer than"},
		{"judge no threshold", `{"method":"llm_judge","judgePrompt":"{output}{contract}"}`, "passThreshold is required"},
		{"judge threshold high", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":1.5}`, "passThreshold must be"},
		{"judge even evaluations", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"evaluations":2}`, "odd"},
		{"judge zero evaluations", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"evaluations":0}`, "odd"},
		{"judge negative evaluations", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"evaluations":-1}`, "odd"},
		{"judge many evaluations", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"evaluations":17}`, "odd"},
		{"judge fractional evaluations", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"evaluations":3.0}`, "cannot unmarshal"},
		{"judge temperature high", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"judgeTemperature":2.5}`, "judgeTemperature"},
		{"judge temperature negative", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"judgeTemperature":-1}`, "judgeTemperature"},
		{"judge model control", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"judgeModel":"a\nb"}`, "control"},
		{"judge model long", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"judgeModel":"` + strings.Repeat("m", MaxJudgeModelLen+1) + `"}`, "judgeModel longer"},
		{"judge timeout", `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"timeoutMs":5}`, `"timeoutMs" is not used`},
		{"review no prompt", `{"method":"human_review","passThreshold":0.5}`, "judgePrompt is required"},
		{"review no threshold", `{"method":"human_review","judgePrompt":"{output}{contract}"}`, "passThreshold is required"},
		{"review timeout zero", `{"method":"human_review","judgePrompt":"{output}{contract}","passThreshold":0.5,"timeoutMs":0}`, "timeoutMs must be"},
		{"review timeout long", `{"method":"human_review","judgePrompt":"{output}{contract}","passThreshold":0.5,"timeoutMs":2592000001}`, "timeoutMs must be"},
		{"review with steps", `{"method":"human_review","judgePrompt":"{output}{contract}","passThreshold":0.5,"steps":[]}`, `"steps" is not used`},
	} {
		_, err := ParseSpec([]byte(c.spec))
		if err == nil {
			t.Errorf("%s: ParseSpec accepted %s", c.name, truncate(c.spec, 200))
			continue
		}
		if !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%s: error %v does not match ErrInvalidSpec", c.name, err)
		}
		var se *SpecError
		if !errors.As(err, &se) {
			t.Errorf("%s: error %v is not a *SpecError", c.name, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.want)
		}
	}
}

// TestSpecNodeLimit: MaxSpecNodes bounds the tree even when no composite
// has too many steps and nothing is nested too deep.
func TestSpecNodeLimit(t *testing.T) {
	step := `{"method":"schema_match","schema":{}}`
	inner := `{"method":"composite","mode":"all_pass","steps":[` + strings.Repeat(step+",", 49) + step + `]}`
	outer := `{"method":"composite","mode":"all_pass","steps":[` + strings.Repeat(inner+",", 5) + inner + `]}`
	_, err := ParseSpec([]byte(outer))
	if err == nil || !strings.Contains(err.Error(), "more than 256 specs") {
		t.Fatalf("ParseSpec of 307 specs: %v", err)
	}
}

// TestValidateGoSpec: Validate refuses what JSON cannot express but a Go
// caller can build.
func TestValidateGoSpec(t *testing.T) {
	nan, inf, half := mathNaN(), mathInf(), 0.5
	three := 3
	for _, s := range []*Spec{
		{Method: MethodComposite, Mode: ModeWeighted, Weights: []float64{nan}, Steps: []Spec{{Method: MethodSchemaMatch, Schema: json.RawMessage(`{}`)}}},
		{Method: MethodComposite, Mode: ModeWeighted, Weights: []float64{inf}, Steps: []Spec{{Method: MethodSchemaMatch, Schema: json.RawMessage(`{}`)}}},
		{Method: MethodComposite, Mode: ModeWeighted, Weights: []float64{1}, PassThreshold: &nan, Steps: []Spec{{Method: MethodSchemaMatch, Schema: json.RawMessage(`{}`)}}},
		{Method: MethodLLMJudge, JudgePrompt: "{output}{contract}", PassThreshold: &nan},
		{Method: MethodLLMJudge, JudgePrompt: "{output}{contract}", PassThreshold: &half, JudgeTemperature: &nan},
		{Method: MethodLLMJudge, JudgePrompt: "{output}{contract}", PassThreshold: &half, Evaluations: &three, JudgeTemperature: &inf},
		{Method: MethodSchemaMatch, Schema: json.RawMessage(`{"type":`)},
		{Method: MethodDeterministicCheck, CheckName: "x", CheckParams: json.RawMessage(`{"a":1,"a":2}`)},
	} {
		if err := s.Validate(); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("Validate(%+v) = %v", s, err)
		}
	}
}
