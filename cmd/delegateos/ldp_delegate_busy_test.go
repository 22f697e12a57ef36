package main

import (
	"net/http"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestLDPDelegateBusyIsNotInvalidToken: the LDP front answered any 503 of
// its own endpoint as the initiator's token refused (rtldp4 #4):
// TASK_FAILED invalid_token, category security. The server's relay
// session table is full (--max-sessions 1, taken by one MCP client: any
// holder of any token can do it at the default 256), so the endpoint
// answers the front's call 503 "too many sessions open" before any
// decision: the delegate's capacity, not the initiator's credentials. The
// initiator is told its (valid) token is invalid, and 'ldp submit
// --record' takes invalid_token/security as a refusal: the delegate not
// serving is never counted. (Draining answers 503 too.) Now a 503 that
// names no AVP-Sig signature_* reason is the delegate's: TASK_FAILED,
// runtime, retryable.
func TestLDPDelegateBusyIsNotInvalidToken(t *testing.T) {
	env := mcptest.NewEnv(t)
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = peerSection
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server")), "--max-sessions", "1"}})
	hdr := map[string]string{"Authorization": "Bearer " + env.Mint(nil, "mcp:echo:*").String()}
	res := srv.Do(http.MethodPost, "/mcp", hdr, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if res.Status != http.StatusOK {
		t.Fatalf("initialize: %d %s", res.Status, res.Body)
	}
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	reply := peerSubmit(t, s, "a", "echo", `"x"`, nil)
	f, ok := reply.Body.(*ldp.TaskFailed)
	if !ok {
		t.Fatalf("with the relay's session table full: %+v", reply.Body)
	}
	if f.Error.Category != ldp.CategoryRuntime || !f.Error.Retryable {
		t.Fatalf("the delegate's session table is full; the initiator (valid token) is told %s/%s: %s", f.Error.Code, f.Error.Category, f.Error.Message)
	}
}
