package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ReviewRequest is what a human reviewer is shown.
type ReviewRequest struct {
	Task   Task
	Output json.RawMessage
	// Spec is the human_review spec; its judgePrompt is the rubric.
	Spec *Spec
	// Deadline is when Verify stops waiting and escalates to llm_judge.
	Deadline time.Time
}

// Reviewer is human_review's callback (§6.6). Review returns the human's
// verdict; its ctx is done at the review deadline or when Verify's context
// is. A score, if set, must be in [0, 1]. An error is Verify's error, not
// an escalation: only a reviewer that has not answered by the deadline is
// replaced by the judge.
type Reviewer interface {
	Review(ctx context.Context, req ReviewRequest) (CheckResult, error)
}

// ReviewerFunc adapts a function to Reviewer.
type ReviewerFunc func(ctx context.Context, req ReviewRequest) (CheckResult, error)

// Review calls f.
func (f ReviewerFunc) Review(ctx context.Context, req ReviewRequest) (CheckResult, error) {
	return f(ctx, req)
}

var _ Reviewer = ReviewerFunc(nil)

type reviewAnswer struct {
	res CheckResult
	err error
}

// evalReview runs human_review: the reviewer is asked and waited for until
// the timeout (the spec's timeoutMs, else the Verifier's ReviewTimeout, else
// DefaultReviewTimeout); then the spec is judged as llm_judge. The reviewer
// runs in its own goroutine, so one that ignores its context cannot hold
// Verify past the deadline.
func (r *run) evalReview(s *Spec) (CheckResult, error) {
	if r.v.Reviewer == nil {
		return CheckResult{}, ErrNoReviewer
	}
	def := r.v.ReviewTimeout
	if def <= 0 {
		def = DefaultReviewTimeout
	}
	timeout := s.reviewTimeout(def)
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	answer := make(chan reviewAnswer, 1)
	go func() {
		res, err := r.v.Reviewer.Review(ctx, ReviewRequest{Task: r.task, Output: r.raw, Spec: s, Deadline: deadline})
		answer <- reviewAnswer{res, err}
	}()
	var a reviewAnswer
	select {
	case a = <-answer:
	case <-ctx.Done():
		select {
		case a = <-answer: // answered just in time
		default:
			if err := r.ctx.Err(); err != nil {
				return CheckResult{}, err
			}
			return r.escalate(s, timeout)
		}
	}
	if a.err != nil {
		if r.ctx.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(a.err, context.DeadlineExceeded) {
			return r.escalate(s, timeout) // the reviewer gave up at the deadline
		}
		if err := r.ctx.Err(); err != nil {
			return CheckResult{}, err
		}
		return CheckResult{}, fmt.Errorf("human review: %w", a.err)
	}
	if err := checkResult(a.res); err != nil {
		return CheckResult{}, fmt.Errorf("human review: %w", err)
	}
	return a.res, nil
}

// escalate judges a human_review spec as llm_judge after the timeout.
func (r *run) escalate(s *Spec, timeout time.Duration) (CheckResult, error) {
	res, err := r.evalJudge(s)
	if err != nil {
		return CheckResult{}, fmt.Errorf("human review timed out after %v; escalation to llm_judge: %w", timeout, err)
	}
	res.Details = fmt.Sprintf("human review timed out after %v; escalated to llm_judge: %s", timeout, res.Details)
	return res, nil
}
