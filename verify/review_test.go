package verify

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const reviewSpec = `{"method":"human_review","judgePrompt":"Is {output} what {contract} asks?","passThreshold":0.7}`

func TestHumanReviewAnswers(t *testing.T) {
	var got ReviewRequest // written before the answer is sent, read after it arrives
	rev := ReviewerFunc(func(ctx context.Context, req ReviewRequest) (CheckResult, error) {
		got = req
		return CheckResult{Passed: true, Score: score(0.9), Details: "approved by alice"}, nil
	})
	j := &scriptedJudge{scores: []float64{0}}
	start := time.Now()
	res, err := verifyJSON(t, &Verifier{Reviewer: rev, Judge: j}, reviewSpec, `{"x":1}`)
	if err != nil || !res.Passed || res.Details != "approved by alice" {
		t.Fatalf("%+v %v", res, err)
	}
	if len(j.reqs) != 0 {
		t.Error("the judge was asked although the reviewer answered")
	}
	if string(got.Output) != `{"x":1}` || got.Task.Title != "T" || got.Spec.JudgePrompt == "" {
		t.Errorf("request: %+v", got)
	}
	if d := got.Deadline.Sub(start); d < DefaultReviewTimeout-time.Minute || d > DefaultReviewTimeout+time.Minute {
		t.Errorf("deadline %v from now, want the 24h default", d)
	}
}

// TestHumanReviewTimeout: a reviewer that does not answer in time is
// replaced by llm_judge, whether it honours its context or not.
func TestHumanReviewTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	for name, rev := range map[string]Reviewer{
		"honours ctx": ReviewerFunc(func(ctx context.Context, req ReviewRequest) (CheckResult, error) {
			<-ctx.Done()
			return CheckResult{}, ctx.Err()
		}),
		"ignores ctx": ReviewerFunc(func(ctx context.Context, req ReviewRequest) (CheckResult, error) {
			<-release
			return CheckResult{Passed: false}, nil
		}),
	} {
		j := &scriptedJudge{scores: []float64{0.8}}
		v := &Verifier{Reviewer: rev, Judge: j, ReviewTimeout: 20 * time.Millisecond}
		start := time.Now()
		res, err := verifyJSON(t, v, reviewSpec, `1`)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !res.Passed || scoreVal(res) != 0.8 || len(j.reqs) != 3 || !strings.Contains(res.Details, "escalated to llm_judge") {
			t.Errorf("%s: %+v, %d judge calls", name, res, len(j.reqs))
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
}

// TestHumanReviewSpecTimeout: the spec's timeoutMs wins over the
// Verifier's ReviewTimeout.
func TestHumanReviewSpecTimeout(t *testing.T) {
	deadlines := make(chan time.Time, 1)
	rev := ReviewerFunc(func(ctx context.Context, req ReviewRequest) (CheckResult, error) {
		deadlines <- req.Deadline
		<-ctx.Done()
		return CheckResult{}, ctx.Err()
	})
	spec := strings.Replace(reviewSpec, `"passThreshold"`, `"timeoutMs":30,"passThreshold"`, 1)
	start := time.Now()
	res, err := verifyJSON(t, &Verifier{Reviewer: rev, Judge: &scriptedJudge{scores: []float64{0.1}}, ReviewTimeout: time.Hour}, spec, `1`)
	if err != nil || res.Passed || !strings.Contains(res.Details, "timed out after 30ms") {
		t.Fatalf("%+v %v", res, err)
	}
	if d := (<-deadlines).Sub(start); d > time.Second {
		t.Errorf("deadline %v away", d)
	}
}

func TestHumanReviewFailsClosed(t *testing.T) {
	judge := &scriptedJudge{scores: []float64{1}}
	ok := ReviewerFunc(func(context.Context, ReviewRequest) (CheckResult, error) { return CheckResult{Passed: true}, nil })
	if _, err := verifyJSON(t, &Verifier{Judge: judge}, reviewSpec, `1`); !errors.Is(err, ErrNoReviewer) {
		t.Errorf("no reviewer: %v", err)
	}
	if _, err := verifyJSON(t, &Verifier{Reviewer: ok}, reviewSpec, `1`); !errors.Is(err, ErrNoJudge) {
		t.Errorf("no judge to escalate to: %v", err)
	}
	failing := ReviewerFunc(func(context.Context, ReviewRequest) (CheckResult, error) {
		return CheckResult{}, errors.New("review queue down")
	})
	if _, err := verifyJSON(t, &Verifier{Reviewer: failing, Judge: judge}, reviewSpec, `1`); err == nil || !strings.Contains(err.Error(), "review queue down") {
		t.Errorf("reviewer error: %v", err)
	}
	if len(judge.reqs) != 0 {
		t.Error("a reviewer error escalated to the judge")
	}
	for _, s := range []float64{mathNaN(), -1, 2} {
		bad := ReviewerFunc(func(context.Context, ReviewRequest) (CheckResult, error) {
			return CheckResult{Passed: true, Score: score(s)}, nil
		})
		if _, err := verifyJSON(t, &Verifier{Reviewer: bad, Judge: judge}, reviewSpec, `1`); !errors.Is(err, ErrBadResult) {
			t.Errorf("reviewer score %v: %v", s, err)
		}
	}
	// Escalation whose judge fails is an error.
	slow := ReviewerFunc(func(ctx context.Context, _ ReviewRequest) (CheckResult, error) {
		<-ctx.Done()
		return CheckResult{}, ctx.Err()
	})
	v := &Verifier{Reviewer: slow, Judge: &scriptedJudge{err: errors.New("down")}, ReviewTimeout: time.Millisecond}
	if _, err := verifyJSON(t, v, reviewSpec, `1`); !errors.Is(err, ErrJudge) {
		t.Errorf("escalation to a failing judge: %v", err)
	}
}

// TestHumanReviewCancelled: cancelling Verify's context ends the wait with
// the context's error, not an escalation.
func TestHumanReviewCancelled(t *testing.T) {
	judge := &scriptedJudge{scores: []float64{1}}
	for name, rev := range map[string]Reviewer{
		"honours ctx": ReviewerFunc(func(ctx context.Context, _ ReviewRequest) (CheckResult, error) {
			<-ctx.Done()
			return CheckResult{}, ctx.Err()
		}),
		"ignores ctx": ReviewerFunc(func(ctx context.Context, _ ReviewRequest) (CheckResult, error) {
			time.Sleep(time.Second)
			return CheckResult{Passed: true}, nil
		}),
	} {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		v := &Verifier{Reviewer: rev, Judge: judge}
		_, err := v.Verify(ctx, mustSpec(t, reviewSpec), Task{}, json.RawMessage(`1`))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(judge.reqs) != 0 {
		t.Error("cancellation escalated to the judge")
	}
}
