package proxy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// connectModern connects mcp-go's client on MCP 2026-07-28, where the
// approval is asked for with an input_required result; with elicitation
// when a is set.
func (r *approvalRun) connectModern(a *approver) *mcptest.Session {
	var o mcptest.SessionOptions
	if a != nil {
		o.ClientOptions = []client.ClientOption{client.WithElicitationHandler(a)}
	}
	return r.p.Connect(o)
}

// TestApprovalModern: a 2026-07-28 client is asked through an
// input_required result and the call it sends back with the answer is
// forwarded (accept) or refused (decline, no capability), the refusals
// uncharged.
func TestApprovalModern(t *testing.T) {
	for _, c := range []struct {
		name   string
		action mcp.ElicitationResponseAction // "" connects without elicitation
		typ    dct.DenialType
		detail string
		asked  int
	}{
		{"accept", mcp.ElicitationResponseActionAccept, "", "", 1},
		{"decline", mcp.ElicitationResponseActionDecline, gate.ApprovalDeclined, "declined", 1},
		{"cancel", mcp.ElicitationResponseActionCancel, gate.ApprovalDeclined, "cancelled", 1},
		{"no capability", "", gate.ApprovalUnavailable, "elicitation capability", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newApprovalRun(t, "required")
			var a *approver
			if c.action != "" {
				a = &approver{answer: func(mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
					return answerWith(c.action, map[string]any{"approve": true})
				}}
			}
			s := r.connectModern(a)
			for range 2 { // twice: a refusal charged would leave 50 of 150
				res := s.Call(t, "write_file", writeArgs("/project/m.md"))
				if c.typ == "" {
					res.OK(t, "approved write_file")
					if !r.written(t, "/project/m.md") {
						t.Fatal("the approved call did not reach the upstream")
					}
					if res.Frames != 2 {
						t.Errorf("the call took %d tools/call frames, want 2 (asked, then sent back with the answer)", res.Frames)
					}
					break
				}
				checkDenial(t, res, denial{typ: c.typ, detail: c.detail,
					requested: dct.Capability{Namespace: "docs", Action: "write", Resource: "/project/m.md"}, granted: r.tok.Unverified().Authority.Capabilities})
				if r.written(t, "/project/m.md") {
					t.Fatal("a refused call reached the upstream")
				}
			}
			if a != nil {
				asked := a.requests()
				if len(asked) == 0 || !strings.Contains(asked[0].Params.Message, "tool write_file") {
					t.Fatalf("asked %+v", asked)
				}
			}
		})
	}
}

// modernCall is a 2026-07-28 tools/call of write_file with extra params.
func modernCall(id, path, extra string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"write_file","arguments":{"path":%q,"content":"x"},`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"2"}}%s}}`, id, path, extra)
}

// inputRequired reads the proxy's input_required result: its requestState.
func inputRequired(t *testing.T, m mcptest.RawMessage) string {
	t.Helper()
	var res struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.ResultType != "input_required" || res.InputRequests["delegateos/approval"] == nil || res.RequestState == "" {
		t.Fatalf("got %s %+v, want the proxy's input_required result", m.Result, m.Error)
	}
	return res.RequestState
}

func withAnswer(state, action string, approve bool) string {
	return fmt.Sprintf(`,"requestState":%q,"inputResponses":{"delegateos/approval":{"action":%q,"content":{"approve":%v}}}`, state, action, approve)
}

// TestApprovalModernAttacks: a requestState counts once, for the request
// it was issued for, until it expires; one the proxy never issued counts
// for nothing.
func TestApprovalModernAttacks(t *testing.T) {
	r := newRawApprovalBudget(t, "{required: true, timeout: 3s}", 10_000)
	c := r.c
	c.Send(modernCall("1", "/project/m.md", ""))
	state := inputRequired(t, c.Response("1"))
	if r.written(t, "/project/m.md") {
		t.Fatal("the call reached the upstream before the answer")
	}
	// Another request under the approval of the first.
	c.Send(modernCall("2", "/project/other.md", withAnswer(state, "accept", true)))
	wantDenialFrame(t, c.Response("2"), gate.ApprovalDeclined, "not the request that was to be approved")
	// The state was spent by that attempt.
	c.Send(modernCall("3", "/project/m.md", withAnswer(state, "accept", true)))
	wantDenialFrame(t, c.Response("3"), gate.ApprovalDeclined, "names no approval")
	// A state the proxy never issued.
	c.Send(modernCall("4", "/project/m.md", withAnswer("delegateos-approval-state-00000000000000000000000000000000", "accept", true)))
	wantDenialFrame(t, c.Response("4"), gate.ApprovalDeclined, "names no approval")
	if r.written(t, "/project/m.md") || r.written(t, "/project/other.md") || r.upstreamWrites() != 0 {
		t.Fatal("a call without a valid approval reached the upstream")
	}
	// Honest: asked, answered, forwarded once; the same answer again is refused.
	c.Send(modernCall("5", "/project/m.md", ""))
	state = inputRequired(t, c.Response("5"))
	c.Send(modernCall("6", "/project/m.md", withAnswer(state, "accept", true)))
	mcptest.ResultText(t, c.Response("6"))
	c.Send(modernCall("7", "/project/m.md", withAnswer(state, "accept", true)))
	wantDenialFrame(t, c.Response("7"), gate.ApprovalDeclined, "names no approval")
	if n := r.upstreamWrites(); n > 1 {
		t.Errorf("the upstream ran write_file %d times", n)
	}
	// An answer after the timeout.
	c.Send(modernCall("8", "/project/late.md", ""))
	state = inputRequired(t, c.Response("8"))
	time.Sleep(3100 * time.Millisecond)
	c.Send(modernCall("9", "/project/late.md", withAnswer(state, "accept", true)))
	wantDenialFrame(t, c.Response("9"), gate.ApprovalDeclined, "no answer to the approval request within 3s")
	if r.written(t, "/project/late.md") {
		t.Fatal("an answer after the timeout let the call through")
	}
}
