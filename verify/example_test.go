package verify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/delegateos/delegateos/verify"
)

// A contract's verification spec: the output must match a schema and
// carry a version string.
func Example() {
	spec, err := verify.ParseSpec([]byte(`{
		"method": "composite",
		"mode": "all_pass",
		"steps": [
			{"method": "schema_match", "schema": {"type": "object", "required": ["version"]}},
			{"method": "deterministic_check", "checkName": "regex_match",
			 "checkParams": {"pattern": "^v\\d+\\.\\d+\\.\\d+$", "field": "version"}}
		]
	}`))
	if err != nil {
		log.Fatal(err)
	}
	var v verify.Verifier // the built-in checks, no judge, no reviewer
	for _, output := range []string{`{"version":"v1.2.3"}`, `{"version":"1.2"}`} {
		res, err := v.Verify(context.Background(), spec, verify.Task{}, json.RawMessage(output))
		if err != nil {
			log.Fatal(err)
		}
		line := fmt.Sprint(res.Passed)
		if res.Details != "" {
			line += " " + res.Details
		}
		fmt.Println(line)
	}
	// Output:
	// true
	// false Step 1 failed: no match for the pattern
}

// A weighted composite: steps without a score count 1.0 when they pass.
func ExampleVerifier_Verify_weighted() {
	spec, err := verify.ParseSpec([]byte(`{
		"method": "composite", "mode": "weighted", "weights": [0.6, 0.4], "passThreshold": 0.5,
		"steps": [
			{"method": "deterministic_check", "checkName": "field_exists", "checkParams": {"fields": ["summary"]}},
			{"method": "deterministic_check", "checkName": "string_length", "checkParams": {"max": 10, "field": "summary"}}
		]
	}`))
	if err != nil {
		log.Fatal(err)
	}
	res, err := (&verify.Verifier{}).Verify(context.Background(), spec, verify.Task{}, json.RawMessage(`{"summary":"far too long a summary"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Passed, *res.Score)
	// Output: true 0.6
}

// A custom check function, registered next to the built-ins.
func ExampleRegistry_Register() {
	reg := verify.DefaultRegistry()
	err := reg.Register("has_sources", func(output any, params json.RawMessage) (verify.CheckResult, error) {
		obj, _ := output.(map[string]any)
		sources, _ := obj["sources"].([]any)
		return verify.CheckResult{Passed: len(sources) > 0}, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	spec, err := verify.ParseSpec([]byte(`{"method":"deterministic_check","checkName":"has_sources"}`))
	if err != nil {
		log.Fatal(err)
	}
	res, err := (&verify.Verifier{Registry: reg}).Verify(context.Background(), spec, verify.Task{}, json.RawMessage(`{"sources":["a"]}`))
	fmt.Println(res.Passed, err)
	// Output: true <nil>
}

// llm_judge with a Judge: three evaluations, the median decides.
func ExampleVerifier_Verify_llmJudge() {
	spec, err := verify.ParseSpec([]byte(`{
		"method": "llm_judge", "passThreshold": 0.7,
		"judgePrompt": "Does {output} answer the question in {contract} correctly?"
	}`))
	if err != nil {
		log.Fatal(err)
	}
	scores := []float64{0.9, 0.5, 0.8}
	calls := 0
	judge := verify.JudgeFunc(func(ctx context.Context, req verify.JudgeRequest) (verify.JudgeResponse, error) {
		// A real Judge sends req.Prompt to req.Model and parses the reply
		// with verify.ParseJudgeReply.
		s := scores[calls]
		calls++
		return verify.JudgeResponse{Score: s, Reasoning: "ok"}, nil
	})
	v := &verify.Verifier{Judge: judge, Warn: func(msg string) { fmt.Println("warning") }}
	task := verify.Task{Title: "Answer", Description: "What is 6×7?"}
	res, err := v.Verify(context.Background(), spec, task, json.RawMessage(`{"answer":42}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Passed, *res.Score, calls)
	// Output:
	// warning
	// true 0.8 3
}

// CommandJudge runs a local program per evaluation: the prompt on stdin,
// the reply on stdout.
func ExampleCommandJudge() {
	judge := &verify.CommandJudge{Command: []string{"sh", "-c", `cat >/dev/null; echo '{"score": 0.9, "reasoning": "complete"}'`}}
	resp, err := judge.Judge(context.Background(), verify.JudgeRequest{Prompt: "...", Model: verify.DefaultJudgeModel})
	fmt.Println(resp.Score, resp.Reasoning, err)
	// Output: 0.9 complete <nil>
}

func ExampleParseJudgeReply() {
	for _, reply := range []string{
		`{"score": 0.85, "reasoning": "covers every point"}`,
		"```json\n{\"score\": 0.85, \"reasoning\": \"covers every point\"}\n```",
		`{"score": "high", "reasoning": "x"}`,
	} {
		r, err := verify.ParseJudgeReply([]byte(reply))
		fmt.Println(r.Score, err != nil)
	}
	// Output:
	// 0.85 false
	// 0 true
	// 0 true
}
