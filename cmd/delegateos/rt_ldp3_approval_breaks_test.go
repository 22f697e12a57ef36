//go:build redteam

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Attacks of rtldp3 on LDP approval (main at 52e10ec) that BREAK it.

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
