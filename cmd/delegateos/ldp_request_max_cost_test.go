package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestRequestMaxCostCannotHelp: params._delegateos.maxCostMicrocents only
// lowers what a call may reserve. An MCP client that writes it huge, as a
// string, fractional, in exponent form or negative gains nothing: the
// token's budget (150: one call of 100) still ends at the second call;
// forms other than an integer are refused before the call. The upstream
// never sees the member, neither an MCP client's nor the one the LDP front
// writes from a task's contract budget (rtldp4, held).
func TestRequestMaxCostCannotHelp(t *testing.T) {
	u := newPeerUpstream()
	env := mcptest.NewEnv(t)
	srv := upstreamLDPServe(t, env, u, false)
	tok := env.Mint(func(p *dct.CreateParams) { p.MaxBudgetMicrocents = 150 }, "mcp:echo:*")
	hdr := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Authorization": "Bearer " + tok.String()}
	call := func(max string) string {
		return string(srv.Do(http.MethodPost, "/mcp", hdr, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_delegateos":{"maxCostMicrocents":`+max+`},`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}`).Body)
	}
	for _, bad := range []string{`"1000"`, `100.5`, `1e3`, `-1`} {
		out := call(bad)
		if strings.Contains(out, `"result"`) {
			t.Fatalf("maxCostMicrocents %s: the call ran: %s", bad, out)
		}
		select {
		case got := <-u.calls:
			t.Fatalf("maxCostMicrocents %s: the upstream got %s (answer %s)", bad, got, out)
		default:
		}
	}
	u.answers <- `"result":{"content":[{"type":"text","text":"ok"}]}`
	if out := call("9223372036854775807"); !strings.Contains(out, `"ok"`) {
		t.Fatalf("a call of cost 100 under the largest maximum: %s", out)
	}
	if got := <-u.calls; bytes.Contains(bytes.ToLower(got), []byte("_delegateos")) || bytes.Contains(got, []byte("maxCost")) {
		t.Fatalf("the upstream saw the client's member: %s", got)
	}
	if out := call("9223372036854775807"); !strings.Contains(out, "budget_exceeded") {
		t.Fatalf("a second call of 100 under a token budget of 150, with the largest maximum: %s", out)
	}
	// An LDP task under a contract budget: the front writes the member,
	// the relay takes it off.
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	budget := 0.001
	u.answers <- `"result":{"content":[{"type":"text","text":"ok"}]}`
	reply, err := s.Submit(t.Context(), &ldp.TaskSubmit{TaskID: "c", Skill: "echo", Input: json.RawMessage(`"x"`),
		Contract: &ldp.DelegationContract{ContractID: "c1", Objective: "echo", CreatedAt: "2026-01-01T00:00:00Z",
			Policy: ldp.PolicyEnvelope{FailurePolicy: ldp.FailClosed, Budget: &ldp.BudgetPolicy{MaxCostUSD: &budget}}}}, ldp.ModeText, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := <-u.calls
	if _, ok := reply.Body.(*ldp.TaskResult); !ok {
		t.Fatalf("the task: %+v", reply.Body)
	}
	if bytes.Contains(bytes.ToLower(got), []byte("_delegateos")) {
		t.Fatalf("the upstream saw the front's member: %s", got)
	}
}
