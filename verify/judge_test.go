package verify

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestRenderPrompt(t *testing.T) {
	task := Task{Title: "Summarize", Description: "Summarize the report.", OutputSchema: json.RawMessage("{\n  \"type\": \"string\"\n}")}
	got, err := RenderPrompt(task, json.RawMessage("{ \"summary\": \"line1\\nline2 {judgePrompt} {output}\" }"), "Does {output} follow {contract}? {contract.task.title}")
	if err != nil {
		t.Fatal(err)
	}
	want := `You are evaluating whether an AI agent's output satisfies a task contract.

## Contract
Title: Summarize
Description: Summarize the report.
Expected output schema: {"type":"string"}

## Agent Output
{"summary":"line1\nline2 {judgePrompt} {output}"}

## Custom Rubric
Does the Agent Output above follow the Contract above? {contract.task.title}

Rate the output quality from 0.0 to 1.0. Respond with ONLY a JSON object:
{"score": <number>, "reasoning": "<brief explanation>"}`
	if got != want {
		t.Fatalf("prompt:\n%s\nwant:\n%s", got, want)
	}
	empty, err := RenderPrompt(Task{}, json.RawMessage(`1`), "{output}{contract}")
	if err != nil || !strings.Contains(empty, "Expected output schema: {}\n") {
		t.Fatalf("empty schema: %q %v", empty, err)
	}
	if _, err := RenderPrompt(Task{OutputSchema: json.RawMessage(`{`)}, json.RawMessage(`1`), ""); err == nil {
		t.Fatal("a broken output schema was rendered")
	}
}

func TestParseJudgeReply(t *testing.T) {
	for _, c := range []struct {
		reply string
		score float64
		ok    bool
	}{
		{`{"score":0.8,"reasoning":"good"}`, 0.8, true},
		{"\n  {\"score\": 1, \"reasoning\": \"\"}\n", 1, true},
		{`{"reasoning":"r","score":0}`, 0, true},
		{`{"score":8e-1,"reasoning":"r"}`, 0.8, true},
		{`{"score":1.0000001,"reasoning":"r"}`, 0, false},
		{`{"score":-0.1,"reasoning":"r"}`, 0, false},
		{`{"score":1e999,"reasoning":"r"}`, 0, false},
		{`{"score":"0.8","reasoning":"r"}`, 0, false},
		{`{"score":null,"reasoning":"r"}`, 0, false},
		{`{"score":true,"reasoning":"r"}`, 0, false},
		{`{"score":[0.8],"reasoning":"r"}`, 0, false},
		{`{"score":0.8}`, 0, false},
		{`{"reasoning":"r"}`, 0, false},
		{`{"score":0.8,"reasoning":5}`, 0, false},
		{`{"score":0.8,"reasoning":"r","extra":1}`, 0, false},
		{`{"score":0.8,"Score":0.1,"reasoning":"r"}`, 0, false},
		{`{"score":0.1,"score":0.9,"reasoning":"r"}`, 0, false},
		{`{"SCORE":0.8,"reasoning":"r"}`, 0, false},
		{"```json\n{\"score\":0.8,\"reasoning\":\"r\"}\n```", 0, false},
		{`Here you go: {"score":0.8,"reasoning":"r"}`, 0, false},
		{`{"score":0.8,"reasoning":"r"} and more`, 0, false},
		{`{"score":0.8,"reasoning":"r"}{}`, 0, false},
		{`[{"score":0.8,"reasoning":"r"}]`, 0, false},
		{`null`, 0, false},
		{``, 0, false},
		{"{\"score\":0.8,\"reasoning\":\"\xff\"}", 0, false},
		{`{"score":0.8,"reasoning":"` + strings.Repeat("a", MaxJudgeReplyLen) + `"}`, 0, false},
	} {
		got, err := ParseJudgeReply([]byte(c.reply))
		if c.ok != (err == nil) || (c.ok && got.Score != c.score) {
			t.Errorf("ParseJudgeReply(%q) = %+v, %v", truncate(c.reply, 60), got, err)
		}
		if err != nil && !errors.Is(err, ErrBadJudgeReply) {
			t.Errorf("ParseJudgeReply(%q): %v does not match ErrBadJudgeReply", truncate(c.reply, 60), err)
		}
	}
}

func TestLLMJudge(t *testing.T) {
	for _, c := range []struct {
		name   string
		spec   string
		scores []float64
		passed bool
		score  float64
		calls  int
		warned bool
	}{
		{"median of 3 passes", judgeSpec, []float64{0.9, 0.7, 0.8}, true, 0.8, 3, false},
		{"median of 3 fails", judgeSpec, []float64{0.6, 0.85, 0.65}, false, 0.65, 3, false},
		{"at threshold passes", judgeSpec, []float64{0.7}, true, 0.7, 3, false},
		{"spread over 0.3 warns", judgeSpec, []float64{0.2, 0.9, 0.8}, true, 0.8, 3, true},
		{"spread of exactly 0.25 does not warn", judgeSpec, []float64{0.5, 0.75, 0.6}, false, 0.6, 3, false},
		{"one evaluation", strings.Replace(judgeSpec, `"passThreshold"`, `"evaluations":1,"passThreshold"`, 1), []float64{0.4}, false, 0.4, 1, false},
		{"five evaluations", strings.Replace(judgeSpec, `"passThreshold"`, `"evaluations":5,"passThreshold"`, 1), []float64{0, 1, 0.9, 0.1, 0.75}, true, 0.75, 5, true},
	} {
		j := &scriptedJudge{scores: c.scores}
		var warnings []string
		v := &Verifier{Judge: j, Warn: func(m string) { warnings = append(warnings, m) }}
		res, err := verifyJSON(t, v, c.spec, `{"answer":42}`)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if res.Passed != c.passed || scoreVal(res) != c.score || len(j.reqs) != c.calls || (len(warnings) > 0) != c.warned {
			t.Errorf("%s: %+v score %v, %d calls, warnings %q", c.name, res, scoreVal(res), len(j.reqs), warnings)
		}
		if !strings.Contains(res.Details, "scored "+formatScore(c.score)) {
			t.Errorf("%s: details %q lack the median's reasoning", c.name, res.Details)
		}
	}
}

func TestLLMJudgeRequest(t *testing.T) {
	j := &scriptedJudge{scores: []float64{1}}
	_, err := verifyJSON(t, &Verifier{Judge: j}, judgeSpec, `{"answer":42}`)
	if err != nil {
		t.Fatal(err)
	}
	r := j.reqs[0]
	if r.Model != DefaultJudgeModel || r.Temperature != 0 {
		t.Errorf("defaults: %+v", r)
	}
	if !strings.Contains(r.Prompt, "## Agent Output\n{\"answer\":42}\n") || !strings.Contains(r.Prompt, "Title: T\nDescription: D\n") {
		t.Errorf("prompt:\n%s", r.Prompt)
	}
	j = &scriptedJudge{scores: []float64{1}}
	spec := `{"method":"llm_judge","judgePrompt":"{output}{contract}","passThreshold":0.5,"judgeModel":"m-1","judgeTemperature":0.3}`
	if _, err := verifyJSON(t, &Verifier{Judge: j}, spec, `1`); err != nil {
		t.Fatal(err)
	}
	if r := j.reqs[0]; r.Model != "m-1" || r.Temperature != 0.3 {
		t.Errorf("configured: %+v", r)
	}
}

func TestLLMJudgeFailsClosed(t *testing.T) {
	// No judge: an error, before anything runs.
	r := newStepRegistry(t)
	spec := `{"method":"composite","mode":"majority","steps":[` + checkSpec("pass", "") + `,` + judgeSpec + `]}`
	if _, err := verifyJSON(t, &Verifier{Registry: r.reg}, spec, `1`); !errors.Is(err, ErrNoJudge) {
		t.Errorf("no judge: %v", err)
	}
	if r.calls["pass"].calls.Load() != 0 {
		t.Error("a check ran before the missing judge was noticed")
	}
	// A judge error.
	if _, err := verifyJSON(t, &Verifier{Judge: &scriptedJudge{err: errors.New("rate limited")}}, judgeSpec, `1`); !errors.Is(err, ErrJudge) {
		t.Errorf("judge error: %v", err)
	}
	// Scores a Judge implementation must not return.
	for _, s := range []float64{mathNaN(), mathInf(), -mathInf(), -0.01, 1.01} {
		if res, err := verifyJSON(t, &Verifier{Judge: &scriptedJudge{scores: []float64{0.9, s, 0.9}}}, judgeSpec, `1`); !errors.Is(err, ErrBadResult) {
			t.Errorf("judge score %v: %+v, %v", s, res, err)
		}
	}
}
