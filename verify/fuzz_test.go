package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

var fuzzSpecs = []string{
	`{"method":"schema_match","schema":{"type":"object","required":["a"],"properties":{"a":{"type":"string","pattern":"^\\w+$"}}}}`,
	`{"method":"deterministic_check","checkName":"regex_match","checkParams":{"pattern":"^h.l+o$","flags":"iu","field":"a.0"}}`,
	`{"method":"deterministic_check","checkName":"string_length","checkParams":{"min":1,"max":5}}`,
	`{"method":"deterministic_check","checkName":"array_length","checkParams":{"max":2,"field":"a"},"expectedResult":{"passed":true,"score":1}}`,
	`{"method":"deterministic_check","checkName":"field_exists","checkParams":{"fields":["a","b.c"]}}`,
	`{"method":"deterministic_check","checkName":"exit_code","checkParams":{"expected":0}}`,
	`{"method":"deterministic_check","checkName":"output_equals","checkParams":{"expected":{"a":[1,2]}}}`,
	`{"method":"deterministic_check","checkName":"json_schema","checkParams":{"schema":{"items":{"$ref":"#"}}}}`,
	`{"method":"composite","mode":"weighted","weights":[0.5,0.5],"passThreshold":0.6,"steps":[{"method":"schema_match","schema":true},{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5}]}`,
	`{"method":"composite","mode":"majority","steps":[{"method":"human_review","judgePrompt":"{output}{contract}","passThreshold":0.5,"timeoutMs":1},{"method":"composite","mode":"all_pass","steps":[{"method":"schema_match","schema":false}]}]}`,
	`{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"evaluations":5,"judgeModel":"m","judgeTemperature":1}`,
}

// FuzzParseSpec: ParseSpec never panics, and a spec it accepts survives a
// round trip through JSON unchanged and still validates.
func FuzzParseSpec(f *testing.F) {
	for _, s := range fuzzSpecs {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"method":"composite","mode":"all_pass","steps":[{"method":"composite","mode":"all_pass","steps":[]}]}`))
	f.Add([]byte(`{"method":"schema_match","schema":{"$ref":"file:///etc/passwd"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec(data)
		if err != nil {
			return
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseSpec(b)
		if err != nil {
			t.Fatalf("%s does not parse back: %v", b, err)
		}
		if !reflect.DeepEqual(normalizeSpec(s), normalizeSpec(back)) {
			t.Fatalf("round trip changed the spec:\n%s", b)
		}
	})
}

// normalizeSpec compacts a spec's raw JSON members for comparison.
func normalizeSpec(s *Spec) *Spec {
	c := *s
	for _, raw := range []*json.RawMessage{&c.Schema, &c.CheckParams, &c.ExpectedResult} {
		if len(*raw) > 0 {
			*raw = json.RawMessage(sameJSON(*raw))
		}
	}
	c.Steps = nil
	for i := range s.Steps {
		c.Steps = append(c.Steps, *normalizeSpec(&s.Steps[i]))
	}
	return &c
}

// fuzzJudge scores by the prompt's length, so it is deterministic.
type fuzzJudge struct{}

func (fuzzJudge) Judge(_ context.Context, req JudgeRequest) (JudgeResponse, error) {
	return JudgeResponse{Score: float64(len(req.Prompt)%11) / 10, Reasoning: "length"}, nil
}

// FuzzVerify: Verify never panics; a result it returns has a valid score
// and is the same when asked again.
func FuzzVerify(f *testing.F) {
	outputs := []string{`{"a":["hello"],"b":{"c":null},"exitCode":0}`, `"hello"`, `[1,2]`, `null`, `{"a":{"a":1,"a":2}}`, `1e999`}
	for i, s := range fuzzSpecs {
		f.Add([]byte(s), []byte(outputs[i%len(outputs)]))
	}
	rev := ReviewerFunc(func(_ context.Context, req ReviewRequest) (CheckResult, error) {
		return CheckResult{Passed: len(req.Output)%2 == 0}, nil
	})
	f.Fuzz(func(t *testing.T, spec, output []byte) {
		s, err := ParseSpec(spec)
		if err != nil {
			return
		}
		v := &Verifier{Judge: fuzzJudge{}, Reviewer: rev}
		res, err := v.Verify(context.Background(), s, Task{Title: "t"}, output)
		if err != nil {
			return
		}
		if err := checkResult(res); err != nil {
			t.Fatalf("%+v: %v", res, err)
		}
		if bytes.Contains(spec, []byte("human_review")) {
			return // whether the reviewer beats a 1 ms timeout is up to the scheduler
		}
		again, err := v.Verify(context.Background(), s, Task{Title: "t"}, output)
		if err != nil || !reflect.DeepEqual(res, again) {
			t.Fatalf("not deterministic: %+v then %+v, %v", res, again, err)
		}
	})
}

// FuzzCompileJSRegex: the translator never panics and never produces Go
// syntax that fails to compile without saying so; a compiled pattern can
// always be tested.
func FuzzCompileJSRegex(f *testing.F) {
	for _, p := range []string{`^a.b$`, `[^\s\d-z]`, `(?<n>x)|\u{1F600}`, `\p{Script=Greek}+?`, `[]|[^]`, `a{2,3}`, `\cJ\0\x41\u0041`} {
		f.Add(p, "u", "abc😀")
		f.Add(p, "gims", "a\nb")
	}
	f.Fuzz(func(t *testing.T, pattern, flags, input string) {
		re, err := compileJSRegex(pattern, flags)
		if err != nil {
			return
		}
		_, _ = re.test(input)
	})
}

// FuzzParseJudgeReply: a reply is accepted only with a score in [0, 1].
func FuzzParseJudgeReply(f *testing.F) {
	for _, r := range []string{`{"score":0.5,"reasoning":"r"}`, `{"score":"1","reasoning":"r"}`, `{"score":1e-400,"reasoning":""}`, ` {"reasoning":"r","score":-0} `} {
		f.Add([]byte(r))
	}
	f.Fuzz(func(t *testing.T, reply []byte) {
		r, err := ParseJudgeReply(reply)
		if err == nil && !validScore(r.Score) {
			t.Fatalf("accepted score %v", r.Score)
		}
	})
}

// sameJSON writes raw so that two spellings of one JSON value compare
// equal: compacted, with the escapes encoding/json writes ("&" and "<"
// as \u0026 and \u003c, which json.Marshal puts in a RawMessage) decoded.
func sameJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	r := strings.NewReplacer(`\u0026`, "&", `\u003c`, "<", `\u003e`, ">", `\u2028`, "\u2028", `\u2029`, "\u2029")
	return r.Replace(b.String())
}
