package serve_test

import (
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A client that starts a long call and goes away without cancelling it
// leaves a session no request of its client will ever touch: it is reaped
// once it has gone --idle-timeout with no request and no stream read, its
// call cancelled and its upstream stopped, instead of holding a session
// slot and an upstream for as long as the call runs.
func TestServeReapsASessionItsClientLeftMidCall(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--idle-timeout", "1s"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*", "mcp:slow:*"))
	sid := srv.Initialize(tok)
	pid := upstreamPID(t, srv)
	st := srv.PostStream(sid, tok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"steps":3000,"delay_ms":100},"_meta":{"progressToken":1}}}`)
	if m := st.Next(); m["method"] != "notifications/progress" {
		t.Fatalf("first message %v, want progress", m)
	}
	st.Close()
	mcptest.Eventually(t, "the abandoned session's upstream to exit", func() bool { return !alive(pid) })
	if r := srv.Post(sid, tok, mcptest.CallBody("2", "echo", map[string]any{"text": "x"})); r.Status != 404 {
		t.Fatalf("a reaped session: HTTP %d %s", r.Status, r.Body)
	}
}

// A client that stays on its long call's stream keeps its session, however
// long the call runs past --idle-timeout.
func TestServeKeepsASessionWhoseClientReadsItsCall(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--idle-timeout", "1s"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:slow:*"))
	sid := srv.Initialize(tok)
	st := srv.PostStream(sid, tok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"steps":25,"delay_ms":100},"_meta":{"progressToken":1}}}`)
	var last map[string]any
	for m := st.Next(); m != nil; m = st.Next() {
		last = m
	}
	if !strings.Contains(mcptest.JSON(last["result"]), "done 25") {
		t.Fatalf("a call read to its end past the idle timeout ended with %v", last)
	}
}
