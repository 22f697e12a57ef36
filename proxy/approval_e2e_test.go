package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/proxy"
)

// approver answers the proxy's approval requests (and the upstream's own
// elicitations) as answer says, recording every request it was asked.
type approver struct {
	mu     sync.Mutex
	asked  []mcp.ElicitationRequest
	answer func(req mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
}

func (a *approver) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, req)
	a.mu.Unlock()
	return a.answer(req)
}

func (a *approver) requests() []mcp.ElicitationRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]mcp.ElicitationRequest(nil), a.asked...)
}

// answerWith is an answer of action with content.
func answerWith(action mcp.ElicitationResponseAction, content any) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: action, Content: content}}, nil
}

// approvalRun is a proxy whose write_file rule (cost 100) asks for
// approval as approval says, with a token for the project's documents
// and a budget of 150 microcents.
type approvalRun struct {
	e   *mcptest.Env
	p   *mcptest.Process
	tok *dct.Token
}

func newApprovalRun(t *testing.T, approval string) *approvalRun {
	return newApprovalRunBudget(t, approval, 150)
}

// newApprovalRunBudget is newApprovalRun with a token of budget
// microcents.
func newApprovalRunBudget(t *testing.T, approval string, budget int64) *approvalRun {
	e := mcptest.NewEnv(t)
	pol := e.Policy()
	for i := range pol.Rules {
		if pol.Rules[i].Match == "write_file" {
			pol.Rules[i].Cost, pol.Rules[i].Approval = 100, approval
		}
	}
	tok := e.Mint(mcptest.Budget(budget), "docs:read:/project/**", "docs:write:/project/**", "mcp:echo:*", "mcp:elicit:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
	return &approvalRun{e: e, p: p, tok: tok}
}

// connect connects mcp-go's client, declaring elicitation when a is set.
func (r *approvalRun) connect(a *approver) *mcptest.Session {
	o := mcptest.SessionOptions{Legacy: true}
	if a != nil {
		o.ClientOptions = []client.ClientOption{client.WithElicitationHandler(a)}
	}
	return r.p.Connect(o)
}

// written reports whether the document path (under the docs root) exists.
func (r *approvalRun) written(t *testing.T, path string) bool {
	_, err := os.Stat(filepath.Join(r.e.Docs, filepath.FromSlash(path)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func writeArgs(path string) map[string]any {
	return map[string]any{"path": path, "content": "approved text"}
}

// TestApprovalAccept: the call is held while the person is asked, other
// calls flow meanwhile, and only the accepted call reaches the upstream,
// exactly once; the approval request names the tool, arguments, cost and
// delegation; the accepted call is charged, a declined one is not.
func TestApprovalAccept(t *testing.T) {
	r := newApprovalRun(t, "required")
	var s *mcptest.Session
	a := &approver{}
	a.answer = func(req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		if r.written(t, "/project/approved.md") {
			t.Error("the held call reached the upstream before the approval was answered")
		}
		// The relay keeps flowing while the call is held.
		got := mcptest.Text(t, s.Call(t, "read_file", map[string]any{"path": "/project/README.md"}).OK(t, "read_file while a call is held"), 0)
		if got == "" {
			t.Error("read_file while a call is held returned nothing")
		}
		return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})
	}
	s = r.connect(a)
	res := s.Call(t, "write_file", writeArgs("/project/approved.md")).OK(t, "approved write_file")
	if !strings.Contains(mcptest.Text(t, res, 0), "approved.md") {
		t.Errorf("write_file result %q", mcptest.Text(t, res, 0))
	}
	if !r.written(t, "/project/approved.md") {
		t.Fatal("the approved call did not reach the upstream")
	}
	asked := a.requests()
	if len(asked) != 1 {
		t.Fatalf("asked %d times, want once", len(asked))
	}
	msg := asked[0].Params.Message
	for _, want := range []string{`tool write_file`, "docs:write:/project/approved.md", `"path":"/project/approved.md"`, "Cost: 100 microcents", "Delegation: " + r.tok.Unverified().Authority.DelegationID} {
		if !strings.Contains(msg, want) {
			t.Errorf("approval message %q does not contain %q", msg, want)
		}
	}
	schema, _ := json.Marshal(asked[0].Params.RequestedSchema)
	if !strings.Contains(string(schema), `"approve"`) {
		t.Errorf("requestedSchema %s has no approve field", schema)
	}
	if n := len(r.p.LogWith("upstream stderr", mcptest.UpstreamLogged("tool=write_file"))); n > 1 {
		t.Errorf("the upstream ran write_file %d times", n)
	}
	line := r.p.WaitLog("approval outcome", func(m map[string]any) bool { return m["approved"] == true })
	if line["action"] != "accept" || line["answerer"] != "mcptest/0" || len(line["content_sha256"].(string)) != 64 || len(line["request_sha256"].(string)) != 64 {
		t.Errorf("approval line %v", line)
	}
	// 100 of the budget of 150 is spent: a second write does not fit.
	checkDenial(t, s.Call(t, "write_file", writeArgs("/project/second.md")), denial{typ: dct.BudgetExceeded, detail: "costs 100",
		requested: dct.Capability{Namespace: "docs", Action: "write", Resource: "/project/second.md"}, granted: r.tok.Unverified().Authority.Capabilities})
	if len(a.requests()) != 1 {
		t.Error("a call the budget refuses was still put to the person")
	}
}

// TestApprovalRefused: decline, cancel, a form submitted unticked and an
// error answer refuse the call, which never reaches the upstream and is
// not charged.
func TestApprovalRefused(t *testing.T) {
	cases := []struct {
		name   string
		answer func() (*mcp.ElicitationResult, error)
		typ    dct.DenialType
		detail string
	}{
		{"decline", func() (*mcp.ElicitationResult, error) { return answerWith(mcp.ElicitationResponseActionDecline, nil) },
			gate.ApprovalDeclined, "declined"},
		{"cancel", func() (*mcp.ElicitationResult, error) { return answerWith(mcp.ElicitationResponseActionCancel, nil) },
			gate.ApprovalDeclined, "cancelled"},
		{"unticked", func() (*mcp.ElicitationResult, error) {
			return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"approve": false})
		}, gate.ApprovalDeclined, "without approve ticked"},
		{"no content", func() (*mcp.ElicitationResult, error) { return answerWith(mcp.ElicitationResponseActionAccept, nil) },
			gate.ApprovalDeclined, "without approve ticked"},
		{"error", func() (*mcp.ElicitationResult, error) { return nil, errors.New("no display") },
			gate.ApprovalUnavailable, "with an error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newApprovalRun(t, "required")
			a := &approver{answer: func(mcp.ElicitationRequest) (*mcp.ElicitationResult, error) { return c.answer() }}
			s := r.connect(a)
			want := denial{typ: c.typ, detail: c.detail,
				requested: dct.Capability{Namespace: "docs", Action: "write", Resource: "/project/x.md"}, granted: r.tok.Unverified().Authority.Capabilities}
			// Refused twice: a charged refusal would leave 50 of the 150,
			// and the second would be refused for the budget instead.
			for range 2 {
				checkDenial(t, s.Call(t, "write_file", writeArgs("/project/x.md")), want)
			}
			if r.written(t, "/project/x.md") {
				t.Error("a refused call reached the upstream")
			}
			if n := len(a.requests()); n != 2 {
				t.Errorf("asked %d times, want 2", n)
			}
			verdict := map[string]string{"decline": proxy.VerdictDeclined, "cancel": proxy.VerdictCancelled, "unticked": proxy.VerdictDeclined,
				"no content": proxy.VerdictDeclined, "error": proxy.VerdictUnavailable}[c.name]
			r.p.WaitLog("approval outcome", func(l map[string]any) bool { return l["verdict"] == verdict })
			// A call whose rule asks for no approval is not held.
			s.Call(t, "echo", map[string]any{"text": "hi"}).OK(t, "echo")
			if n := len(a.requests()); n != 2 {
				t.Errorf("asked %d times after echo, want 2", n)
			}
		})
	}
}

// TestApprovalUnavailable: a client that did not declare elicitation is
// never asked, and the call is refused at once.
func TestApprovalUnavailable(t *testing.T) {
	r := newApprovalRun(t, "required")
	s := r.connect(nil)
	checkDenial(t, s.Call(t, "write_file", writeArgs("/project/x.md")), denial{typ: gate.ApprovalUnavailable, detail: "elicitation capability",
		requested: dct.Capability{Namespace: "docs", Action: "write", Resource: "/project/x.md"}, granted: r.tok.Unverified().Authority.Capabilities})
	if r.written(t, "/project/x.md") {
		t.Error("a refused call reached the upstream")
	}
	if got := s.Wire.IncomingMethods(); len(got) != 0 {
		t.Errorf("a client without elicitation was sent %v", got)
	}
}

// TestApprovalAbove: approval: {above: COST} asks only for calls that
// reserve more than COST.
func TestApprovalAbove(t *testing.T) {
	for _, c := range []struct {
		approval string
		asked    int
	}{{"{above: 99}", 1}, {"{above: 100}", 0}} {
		r := newApprovalRun(t, c.approval)
		a := &approver{answer: func(mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})
		}}
		r.connect(a).Call(t, "write_file", writeArgs("/project/x.md")).OK(t, "write_file under "+c.approval)
		if n := len(a.requests()); n != c.asked {
			t.Errorf("approval %s: asked %d times, want %d", c.approval, n, c.asked)
		}
	}
}

// TestApprovalUpstreamElicitation: the upstream's own elicitation still
// reaches the client and its answer the upstream, while the proxy's
// approval requests are told apart from it.
func TestApprovalUpstreamElicitation(t *testing.T) {
	r := newApprovalRun(t, "required")
	a := &approver{answer: func(req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		if strings.HasPrefix(req.Params.Message, "delegateos: approve") {
			return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})
		}
		return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"answer": "upstream's answer"})
	}}
	s := r.connect(a)
	res := s.Call(t, "elicit", map[string]any{"message": "what now?"}).OK(t, "elicit")
	if !strings.Contains(mcptest.Text(t, res, 0), "upstream's answer") {
		t.Errorf("elicit result %q", mcptest.Text(t, res, 0))
	}
	s.Call(t, "write_file", writeArgs("/project/x.md")).OK(t, "write_file")
	if n := len(a.requests()); n != 2 {
		t.Errorf("asked %d times, want 2", n)
	}
}
