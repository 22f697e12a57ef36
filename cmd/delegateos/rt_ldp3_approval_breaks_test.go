//go:build redteam

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
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
