package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
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

// A 2026-07-28 client's approved call is one call against the rate limits.
// The request answered with input_required is never forwarded, so it must
// not hold a slot the request sent back with the answer then lacks: under
// rate: 1/1h an approved call must run.
// Found by the red team of the stdio relay (was TestRedteamStdioModernApprovalRate).
func TestE2EApprovalModernCallIsOneRateSlot(t *testing.T) {
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

// A call refused for want of approval keeps its one rate-limit slot
// (README: a person was asked, or could have been), whether the client is
// asked with elicitation/create or with input_required; the input_required
// ask and the retry are one call, not two. Under rate: 2/1h one echo still
// fits after the refusal, and a second does not.
// Found by the red team of the stdio relay (was TestRedteamStdioRefusedApprovalRate).
func TestE2EApprovalRefusedKeepsOneRateSlot(t *testing.T) {
	for _, modern := range []bool{false, true} {
		t.Run(map[bool]string{false: "elicitation", true: "input_required"}[modern], func(t *testing.T) {
			r := newRatedApprovalRun(t, "2/1h")
			a := &approver{answer: func(mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
				return answerWith(mcp.ElicitationResponseActionDecline, nil)
			}}
			var s *mcptest.Session
			if modern {
				s = r.connectModern(a)
			} else {
				s = r.connect(a)
			}
			res := s.Call(t, "write_file", writeArgs("/project/refused.md"))
			checkDenial(t, res, denial{typ: gate.ApprovalDeclined, detail: "declined",
				requested: dct.Capability{Namespace: "docs", Action: "write", Resource: "/project/refused.md"}, granted: r.tok.Unverified().Authority.Capabilities})
			if r.written(t, "/project/refused.md") {
				t.Fatal("a refused call reached the upstream")
			}
			s.Call(t, "echo", map[string]any{"text": "second slot"}).OK(t, "echo: the refused call took one slot of two")
			if _, limited := rateLimited(s.Call(t, "echo", map[string]any{"text": "third"})); !limited {
				t.Error("a third call within the hour was not rate_limited: the refused call took no slot")
			}
		})
	}
}

// Ids that other readers might confuse with a held call's or with the
// proxy's approval request's do not reach them. A cancellation naming "7"
// or "\u0037" (strings) leaves the call held under the number 7, as does
// one whose requestId is re-cased; a request under the approval request's
// own id is an ordinary request (held in its turn); an answer under the
// approval id as a number, or with the id re-cased, is not an answer to
// it; and the real answer still works.
// Found by the red team of the stdio relay (was TestRedteamStdioHeldIDs).
func TestE2EApprovalHeldIDsNotConfused(t *testing.T) {
	r := newRawApprovalBudget(t, "required", 1000)
	r.write("7", "/project/seven.md")
	ask := r.asked(t)
	r.c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"7"}}`)
	r.c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\u0037"}}`)
	r.c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"RequestId":7}}`)
	r.quiet(t, 300*time.Millisecond, "cancellations naming other ids")
	// The approval request's id, used by the client for a request of its own.
	r.write(ask, "/project/other.md")
	other := r.asked(t)
	if other == ask {
		t.Fatalf("the proxy asked twice under %s", ask)
	}
	num := strings.TrimPrefix(strings.TrimSuffix(ask, `"`), `"delegateos-approval-`)
	r.c.Send(answer(`"DELEGATEOS-APPROVAL-`+num+`"`, "accept", true))
	r.c.Send(answer(`"delegateos-approval-`+num+` "`, "accept", true))
	r.quiet(t, 300*time.Millisecond, "answers under other ids")
	if r.written(t, "/project/seven.md") || r.upstreamWrites() != 0 {
		t.Fatal("an answer under another id let the held call through")
	}
	r.c.Send(answer(other, "decline", false))
	wantDenialFrame(t, r.c.Response(ask), gate.ApprovalDeclined, "declined")
	r.c.Send(answer(ask, "accept", true))
	mcptest.ResultText(t, r.c.Response("7"))
	if !r.written(t, "/project/seven.md") || r.written(t, "/project/other.md") {
		t.Error("the approved call did not run, or the declined one did")
	}
}
