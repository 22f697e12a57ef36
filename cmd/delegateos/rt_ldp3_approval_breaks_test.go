//go:build redteam

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/ldp"
)

// Attacks of rtldp3 on LDP approval (main at 52e10ec) that BREAK it.

// TestRT3ApprovalCapPerKeyNotPerTree: at most 16 tasks of one initiator
// wait for approval, 256 in all. The initiator is counted by its key (the
// token's holder), and a holder makes as many keys as it likes: it
// delegates its token on to 16 keys of its own (one attenuation each, as
// any token of depth 2 allows) and fills the 256 places. Another holder,
// with a token from another root delegation, is then refused
// approval_unavailable at once for as long as they wait. (AVP-Sig counts
// nonces per delegation tree for this reason: "its root block, which its
// holders cannot multiply as they can keys".) BROKE: the victim's task is
// refused approval_unavailable.
func TestRT3ApprovalCapPerKeyNotPerTree(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := rt3ApprovalServe(t, env, approver, "required", "")
	own := env.Mint(nil, "mcp:echo:*")
	for k := range 16 {
		sybil := mcptest.NewKey(t, fmt.Sprintf("sybil-%02d", k))
		from := fmt.Sprintf("ldp:delegate:sybil-%02d", k)
		s := rt3Open(t, srv, from, sybil, mcptest.Attenuate(t, own, env.Agent, sybil, 10_000))
		for i := range 16 {
			rt3Held(t, srv, rt3Task(t, s.ID, from, fmt.Sprintf("hold-%02d-%02d", k, i), "x", sybil))
		}
	}
	rt3Awaiting(t, srv, 256)
	victimKey := mcptest.NewKey(t, "victim")
	victimTok := env.Mint(func(p *dct.CreateParams) { p.Delegatee = victimKey.ID() }, "mcp:echo:*")
	vs := rt3Open(t, srv, "ldp:delegate:victim", victimKey, victimTok)
	reply := rt3Held(t, srv, rt3Task(t, vs.ID, "ldp:delegate:victim", "victim", "mine", victimKey))
	var got *ldp.Envelope
	mcptest.Eventually(t, "the victim's task waits or ends", func() bool {
		select {
		case got = <-reply:
			return true
		default:
		}
		return len(srv.LogWith("LDP task awaits approval", func(l map[string]any) bool { return l["task"] == "victim" })) > 0
	})
	if got != nil {
		t.Fatalf("one holder's token, delegated on to 16 keys of its own, took every place: another holder's task is refused %q: %+v", rtFailCode(got), got.Body)
	}
}

// TestRT3ApprovalReloadOverrunsContract: a contract's budget is checked
// against the quote for the task (the policy in force) when the task is
// submitted; a task held for approval is then decided afresh, with the
// policy in force when the approver answers. A reload during the wait
// raises echo from 100 to 300 microcents: the approved task runs and is
// charged 300 under a contract whose budget is 200. BROKE: ran, cost 300.
func TestRT3ApprovalReloadOverrunsContract(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := rt3ApprovalServe(t, env, approver, "required", "")
	path := rt3PolicyPath(srv)
	s := rt3Open(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	max := 2e-6 // 200 microcents
	c := &ldp.DelegationContract{ContractID: "c1", Objective: "echo", CreatedAt: "2026-01-01T00:00:00Z",
		Policy: ldp.PolicyEnvelope{FailurePolicy: ldp.FailClosed, Budget: &ldp.BudgetPolicy{MaxCostUSD: &max}}}
	reply := rt3SubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "c", Skill: "echo", Input: json.RawMessage(`"x"`), Contract: c})
	id := rt3Awaiting(t, srv, 1)["c"]
	yaml, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mcptest.WriteFile(t, path, strings.Replace(string(yaml), "cost: 100", "cost: 300", 1))
	srv.Signal(syscall.SIGHUP)
	srv.WaitLog("policy reloaded", nil)
	if code, out := rt3Approve(t, env, srv, approver, id); code != 0 {
		t.Fatalf("approve: %s", out)
	}
	got := <-reply
	if res, ok := got.Body.(*ldp.TaskResult); ok {
		t.Fatalf("a contract with a budget of 200 microcents ran at %d (the policy reloaded while it waited for approval)",
			*res.Provenance.DelegateOS.CostChargedMicrocents)
	}
	if code := rtFailCode(got); code != ldp.CodeContract {
		t.Fatalf("refused %q, want %s", code, ldp.CodeContract)
	}
}

// TestRT3ApprovalOutlivesSessionClose: the initiator closes its session
// (SESSION_CLOSE, acknowledged) while a task of it waits for approval. The
// task keeps waiting; the approver approves it and it runs and is charged,
// in a session that no longer exists. BROKE: approved and ran.
func TestRT3ApprovalOutlivesSessionClose(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := rt3ApprovalServe(t, env, approver, "required", "")
	s := rt3Open(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	reply := rt3SubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "c", Skill: "echo", Input: json.RawMessage(`"x"`)})
	id := rt3Awaiting(t, srv, 1)["c"]
	if err := s.Close(context.Background(), "done"); err != nil {
		t.Fatal(err)
	}
	code, out := rt3Approve(t, env, srv, approver, id)
	got := <-reply
	if _, ok := got.Body.(*ldp.TaskResult); ok || code == 0 {
		t.Fatalf("a task of a closed session waited on, was approved (exit %d: %s) and answered %s", code, strings.TrimSpace(out), got.Body.Type())
	}
}

// TestRT3ApprovalBypassedThroughMCP: with ldp.approvers, an LDP task a
// rule holds for approval waits for an approver, and "its initiator does
// not approve its own task". The same token's holder sends the same call
// to the server's MCP endpoint (same listener) as a 2026-07-28 client that
// takes form elicitation, is asked through input_required, and answers
// accept itself: the call runs, no approver asked. BROKE: echo ran.
func TestRT3ApprovalBypassedThroughMCP(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := rt3ApprovalServe(t, env, approver, "required", "")
	tok := env.Mint(nil, "mcp:echo:*")
	hdr := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Authorization": "Bearer " + tok.String()}
	call := func(extra string) []byte {
		return srv.Do(http.MethodPost, "/mcp", hdr, `{"jsonrpc":"2.0","id":"self","method":"tools/call","params":{"name":"echo","arguments":{"text":"self-approved"},`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"peer","version":"1"}}`+extra+`}}`).Body
	}
	var first struct {
		Result struct {
			ResultType   string `json:"resultType"`
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	body := call("")
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			json.Unmarshal([]byte(strings.TrimSpace(d)), &first)
		}
	}
	if first.Result.ResultType != "input_required" {
		t.Fatalf("not asked through MCP: %s", body)
	}
	body = call(fmt.Sprintf(`,"requestState":%q,"inputResponses":{"delegateos/approval":{"action":"accept","content":{"approve":true}}}`, first.Result.RequestState))
	if strings.Contains(string(body), `"text":"self-approved"`) {
		t.Fatalf("the token's holder approved its own call of a tool held for the delegate's approvers, through /mcp: echo answered %q", "self-approved")
	}
}

// TestRT3ApprovalRunsPastContractDeadline: a contract's deadline is
// checked when the task is submitted, not after it waited for approval:
// a task whose contract ends 5 s after it was sent is approved once the
// deadline has passed, and runs. BROKE: ran after the deadline.
func TestRT3ApprovalRunsPastContractDeadline(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := rt3ApprovalServe(t, env, approver, "required", "")
	s := rt3Open(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	deadline := time.Now().Add(5 * time.Second)
	c := &ldp.DelegationContract{ContractID: "c1", Objective: "echo", CreatedAt: timestamp.Format(time.Now()), Deadline: timestamp.Format(deadline),
		Policy: ldp.PolicyEnvelope{FailurePolicy: ldp.FailClosed}}
	reply := rt3SubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "d", Skill: "echo", Input: json.RawMessage(`"x"`), Contract: c})
	id := rt3Awaiting(t, srv, 1)["d"]
	mcptest.Eventually(t, "the contract's deadline passed", func() bool { return time.Now().After(deadline.Add(100 * time.Millisecond)) })
	if code, out := rt3Approve(t, env, srv, approver, id); code != 0 {
		t.Fatalf("approve: %s", out)
	}
	if got := <-reply; rtFailCode(got) == "" {
		t.Fatalf("a task ran after its contract's deadline (%s), approved late: %s", timestamp.Format(deadline), got.Body.Type())
	}
}
