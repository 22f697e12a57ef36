package proxy_test

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// newRatedApprovalRun is newApprovalRun("required") with the policy's
// rate set to rate (as the policy's YAML writes it).
func newRatedApprovalRun(t *testing.T, rate string) *approvalRun {
	e := mcptest.NewEnv(t)
	pol := e.Policy()
	for i := range pol.Rules {
		if pol.Rules[i].Match == "write_file" {
			pol.Rules[i].Cost, pol.Rules[i].Approval = 100, "required"
		}
	}
	pol.Extra = "rate: " + rate + "\n"
	tok := e.Mint(mcptest.Budget(150), "docs:read:/project/**", "docs:write:/project/**", "mcp:echo:*", "mcp:elicit:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
	return &approvalRun{e: e, p: p, tok: tok}
}

// TestRedteamStdioModernApprovalRate: a 2026-07-28 client's approved call
// is one call against the rate limits. The request answered with
// input_required is never forwarded, so it must not hold a slot the
// request sent back with the answer then lacks: under rate: 1/1h an
// approved call must run.
func TestRedteamStdioModernApprovalRate(t *testing.T) {
	r := newRatedApprovalRun(t, "1/1h")
	a := &approver{answer: func(mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})
	}}
	s := r.connectModern(a)
	res := s.Call(t, "write_file", writeArgs("/project/rated.md"))
	res.OK(t, "an approved write_file within the rate")
	if !r.written(t, "/project/rated.md") {
		t.Fatal("the approved call did not reach the upstream")
	}
}

// TestRedteamStdioRefusedApprovalRate: a call refused for want of
// approval (declined, or nobody could be asked) never reaches the
// upstream, so, like a call the budget refuses, it gives its rate-limit
// slots back: under rate: 1/1h the next call is admitted.
func TestRedteamStdioRefusedApprovalRate(t *testing.T) {
	for _, c := range []struct {
		name   string
		modern bool
		action mcp.ElicitationResponseAction // "" connects without elicitation
	}{
		{"declined", false, mcp.ElicitationResponseActionDecline},
		{"unavailable", false, ""},
		{"modern declined", true, mcp.ElicitationResponseActionDecline},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRatedApprovalRun(t, "1/1h")
			var a *approver
			if c.action != "" {
				a = &approver{answer: func(mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
					return answerWith(c.action, map[string]any{"approve": false})
				}}
			}
			var s *mcptest.Session
			if c.modern {
				s = r.connectModern(a)
			} else {
				s = r.connect(a)
			}
			if res := s.Call(t, "write_file", writeArgs("/project/refused.md")); res.Err == nil && res.RPC == nil && !res.Res.IsError {
				t.Fatal("the write_file was not refused")
			}
			if r.written(t, "/project/refused.md") {
				t.Fatal("a refused call reached the upstream")
			}
			s.Call(t, "echo", map[string]any{"text": "after the refusal"}).OK(t, "echo: the refused call gave its rate slot back")
		})
	}
}
