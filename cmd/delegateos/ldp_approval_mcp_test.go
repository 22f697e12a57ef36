package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// TestLDPApproversAnswerMCPCalls: with ldp.approvers, an LDP task a rule
// holds for approval waits for an approver, and "its initiator does not
// approve its own task". The same token's holder sent the same call to
// the server's MCP endpoint (same listener) as a 2026-07-28 client that
// takes form elicitation, was asked through input_required, and answered
// accept itself: the call ran, no approver asked (rtldp3 #11). Now, when
// the policy names approvers, they answer every held call: the MCP
// client's is refused approval_unavailable at once (saying who approves),
// whether it sends the call stateless or in a session it initialized with
// elicitation, and echo never runs.
func TestLDPApproversAnswerMCPCalls(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := peerApprovalServe(t, env, approver, "required", "")
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
		Error struct {
			Message string `json:"message"`
			Data    struct {
				Type string `json:"type"`
			} `json:"data"`
		} `json:"error"`
	}
	body := call("")
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			json.Unmarshal([]byte(strings.TrimSpace(d)), &first)
		}
	}
	if first.Result.ResultType == "input_required" {
		body = call(fmt.Sprintf(`,"requestState":%q,"inputResponses":{"delegateos/approval":{"action":"accept","content":{"approve":true}}}`, first.Result.RequestState))
		t.Fatalf("the token's holder was asked to approve its own call of a tool held for the delegate's approvers, through /mcp; its answer: %s", body)
	}
	if first.Error.Data.Type != "approval_unavailable" || !strings.Contains(first.Error.Message, "ldp.approvers") {
		t.Fatalf("a held call through /mcp answered %s, want approval_unavailable naming ldp.approvers", body)
	}
	// A client of a session that declared elicitation in initialize.
	sh := map[string]string{"Authorization": "Bearer " + tok.String()}
	sh["Mcp-Session-Id"] = srv.Initialize(sh)
	res := srv.Do(http.MethodPost, "/mcp", sh, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"self-approved"}}}`)
	if !strings.Contains(string(res.Body), "approval_unavailable") || !strings.Contains(string(res.Body), "ldp.approvers") {
		t.Fatalf("a held call in a session that declared elicitation answered %s, want approval_unavailable naming ldp.approvers", res.Body)
	}
	if n := len(srv.LogWith("decision", func(l map[string]any) bool { return l["tool"] == "echo" && l["outcome"] == "result" })); n != 0 {
		t.Fatalf("echo ran %d times", n)
	}
}
