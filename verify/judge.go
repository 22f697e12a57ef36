package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/internal/strictjson"
)

// Task is what llm_judge's prompt shows of the contract: its task's title,
// description and output schema (§5.1 TaskSpec).
type Task struct {
	Title       string
	Description string
	// OutputSchema is the task's JSON Schema, shown to the judge as compact
	// JSON; empty shows {}.
	OutputSchema json.RawMessage
}

// JudgeRequest is one evaluation asked of a Judge.
type JudgeRequest struct {
	// Prompt is the rendered §6.5 prompt.
	Prompt string
	// Model is the spec's judgeModel (or DefaultJudgeModel).
	Model string
	// Temperature is the spec's judgeTemperature (or 0).
	Temperature float64
}

// JudgeResponse is a judge's verdict on one evaluation.
type JudgeResponse struct {
	// Score must be in [0, 1]; anything else makes Verify fail with
	// ErrBadResult.
	Score     float64 `json:"score"`
	Reasoning string  `json:"reasoning"`
}

// Judge evaluates a prompt with a language model. Implementations that read
// a model's text reply should parse it with ParseJudgeReply.
type Judge interface {
	Judge(ctx context.Context, req JudgeRequest) (JudgeResponse, error)
}

// JudgeFunc adapts a function to Judge.
type JudgeFunc func(ctx context.Context, req JudgeRequest) (JudgeResponse, error)

// Judge calls f.
func (f JudgeFunc) Judge(ctx context.Context, req JudgeRequest) (JudgeResponse, error) {
	return f(ctx, req)
}

var _ Judge = JudgeFunc(nil)

// promptTemplate is §6.5's prompt, split where values are inserted.
var promptTemplate = [...]string{
	"You are evaluating whether an AI agent's output satisfies a task contract.\n\n## Contract\nTitle: ",
	"\nDescription: ",
	"\nExpected output schema: ",
	"\n\n## Agent Output\n",
	"\n\n## Custom Rubric\n",
	"\n\nRate the output quality from 0.0 to 1.0. Respond with ONLY a JSON object:\n{\"score\": <number>, \"reasoning\": \"<brief explanation>\"}",
}

// rubricPlaceholders turns the rubric's placeholders into references to the
// sections the template already renders, in one pass (a replacement is
// never scanned again).
var rubricPlaceholders = strings.NewReplacer(
	"{output}", "the Agent Output above",
	"{contract}", "the Contract above",
)

// RenderPrompt renders the §6.5 prompt for a task, an output (shown as
// compact JSON, so it stays on one line and cannot start sections of its
// own) and a judgePrompt rubric (whose {output} and {contract}
// placeholders become references to those sections). Values are inserted in
// one pass: text in the task or the output is never read as a placeholder.
func RenderPrompt(task Task, output json.RawMessage, judgePrompt string) (string, error) {
	schema := "{}"
	if len(task.OutputSchema) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, task.OutputSchema); err != nil {
			return "", fmt.Errorf("task output schema: %w", err)
		}
		schema = b.String()
	}
	var out bytes.Buffer
	if err := json.Compact(&out, output); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidOutput, err)
	}
	var b strings.Builder
	b.Grow(len(task.Title) + len(task.Description) + len(schema) + out.Len() + len(judgePrompt) + 400)
	for i, v := range []string{task.Title, task.Description, schema, out.String(), rubricPlaceholders.Replace(judgePrompt)} {
		b.WriteString(promptTemplate[i])
		b.WriteString(v)
	}
	b.WriteString(promptTemplate[5])
	return b.String(), nil
}

// ParseJudgeReply reads a model's reply: exactly one JSON object with a
// numeric score in [0, 1] and a reasoning string, and nothing else (white
// space around it aside). Anything else (prose, a code fence, a score
// written as a string, a missing or extra member) is an error wrapping
// ErrBadJudgeReply, never a score.
func ParseJudgeReply(reply []byte) (JudgeResponse, error) {
	if len(reply) > MaxJudgeReplyLen {
		return JudgeResponse{}, fmt.Errorf("%w: longer than %d bytes", ErrBadJudgeReply, MaxJudgeReplyLen)
	}
	reply = bytes.TrimSpace(reply)
	if len(reply) == 0 || reply[0] != '{' {
		return JudgeResponse{}, fmt.Errorf("%w: not a JSON object", ErrBadJudgeReply)
	}
	var r struct {
		Score     json.RawMessage `json:"score"`
		Reasoning *string         `json:"reasoning"`
	}
	if err := strictjson.Unmarshal(reply, &r); err != nil {
		return JudgeResponse{}, fmt.Errorf("%w: %v", ErrBadJudgeReply, err)
	}
	if len(r.Score) == 0 || r.Reasoning == nil {
		return JudgeResponse{}, fmt.Errorf("%w: score and reasoning are required", ErrBadJudgeReply)
	}
	lit := string(r.Score)
	if lit[0] != '-' && (lit[0] < '0' || lit[0] > '9') {
		return JudgeResponse{}, fmt.Errorf("%w: score must be a number", ErrBadJudgeReply)
	}
	if err := checkNumber(lit); err != nil {
		return JudgeResponse{}, fmt.Errorf("%w: %v", ErrBadJudgeReply, err)
	}
	s, _ := strconv.ParseFloat(lit, 64)
	if !validScore(s) {
		return JudgeResponse{}, fmt.Errorf("%w: score %s is not in [0, 1]", ErrBadJudgeReply, lit)
	}
	return JudgeResponse{Score: s, Reasoning: *r.Reasoning}, nil
}

// evalJudge runs llm_judge (§6.5): evaluations calls, the median score
// against passThreshold, a warning when the scores spread more than
// SpreadWarning.
func (r *run) evalJudge(s *Spec) (CheckResult, error) {
	if r.v.Judge == nil {
		return CheckResult{}, ErrNoJudge
	}
	prompt, err := RenderPrompt(r.task, r.raw, s.JudgePrompt)
	if err != nil {
		return CheckResult{}, err
	}
	req := JudgeRequest{Prompt: prompt, Model: s.judgeModel(), Temperature: s.judgeTemperature()}
	n := s.evaluations()
	resps := make([]JudgeResponse, n)
	for i := range resps {
		if err := r.ctx.Err(); err != nil {
			return CheckResult{}, err
		}
		resp, err := r.v.Judge.Judge(r.ctx, req)
		if err != nil {
			return CheckResult{}, fmt.Errorf("%w: evaluation %d: %w", ErrJudge, i+1, err)
		}
		if !validScore(resp.Score) {
			return CheckResult{}, fmt.Errorf("%w: judge score %v is not in [0, 1]", ErrBadResult, resp.Score)
		}
		resps[i] = resp
	}
	scores := make([]float64, n)
	for i, resp := range resps {
		scores[i] = resp.Score
	}
	sorted := slices.Clone(scores)
	slices.Sort(sorted)
	median := sorted[n/2]
	if spread := sorted[n-1] - sorted[0]; spread > SpreadWarning {
		r.v.warn(fmt.Sprintf("verify: %s: llm_judge scores %v spread %s (more than %v); using the median %s",
			r.path, scores, formatScore(spread), SpreadWarning, formatScore(median)))
	}
	reasoning := resps[slices.Index(scores, median)].Reasoning
	return CheckResult{
		Passed: median >= *s.PassThreshold,
		Score:  score(median),
		Details: fmt.Sprintf("median judge score %s of %v (%s), threshold %s: %s",
			formatScore(median), scores, req.Model, formatScore(*s.PassThreshold), reasoning),
	}, nil
}
