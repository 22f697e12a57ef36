package serve_test

import (
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A cancellation that names an in-flight request by another spelling of
// its id (a string id with an escape) cancels it in the relay, which
// matches ids by value; the front must free the request's slot too, or
// the session is left with a call in flight that never ends: its slots
// (and the server's) are never given back, and the session is never
// reaped.
func TestServeCancelByEscapedIDFreesTheSlot(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--max-session-calls", "1"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*", "mcp:slow:*"))
	sid := srv.Initialize(tok)
	st := srv.PostStream(sid, tok, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"slow","arguments":{"steps":200,"delay_ms":50},"_meta":{"progressToken":"a"}}}`)
	if m := st.Next(); m["method"] != "notifications/progress" {
		t.Fatalf("first message %v, want progress", m)
	}
	if r := srv.Post(sid, tok, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\u0061"}}`); r.Status != 202 {
		t.Fatalf("notifications/cancelled: HTTP %d", r.Status)
	}
	srv.WaitLog("upstream stderr", mcptest.UpstreamLogged("slow: cancelled"))
	// The call is over in the relay: its slot must be free again.
	r := srv.Post(sid, tok, mcptest.CallBody("2", "echo", map[string]any{"text": "after"}))
	if r.Status != 200 || !strings.Contains(string(r.Body), "after") {
		t.Fatalf("a call after the cancelled one: HTTP %d %s", r.Status, r.Body)
	}
}
