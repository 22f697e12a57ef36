package serve_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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

// statelessSlow is a stateless (MCP 2026-07-28) tools/call of slow.
func statelessSlow(id string, steps, delayMs int, progressToken string) string {
	meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`
	if progressToken != "" {
		meta += `,"progressToken":` + progressToken
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"slow","arguments":{"steps":%d,"delay_ms":%d},"_meta":{%s}}}`, id, steps, delayMs, meta)
}

var stateless = map[string]string{"Mcp-Protocol-Version": "2026-07-28"}

// A client that abandons requests whose answers are large cannot make its
// session hold their answers without bound in bytes: the oldest abandoned
// answers are dropped once they pass the bound, well before the count
// bound does.
func TestServeBoundsAbandonedAnswerBytes(t *testing.T) {
	e := mcptest.NewEnv(t)
	// No stream is open while the answers come: the session must not be
	// reaped as abandoned however long they take.
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--abandon-timeout", "0"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:big:*"))
	sid := srv.Initialize(tok) // stream 1
	const n = 20               // streams 2 to n+1, 1 MiB each
	for i := range n {
		st := srv.PostStream(sid, tok, mcptest.CallBody(fmt.Sprint(i+1), "big", map[string]any{"bytes": 1 << 20}))
		st.Close()
	}
	// 20 MiB through the relay takes from seconds to minutes (a loaded
	// machine, the race detector): the test waits as long as the answers
	// keep coming, and fails only when one takes CallTimeout on its own
	// (it failed under load with one deadline for all 20).
	waitAnswered := func(k int) {
		t.Helper()
		for deadline := time.Now().Add(mcptest.CallTimeout); ; time.Sleep(50 * time.Millisecond) {
			if len(srv.LogWith("decision", func(m map[string]any) bool { return m["tool"] == "big" && m["outcome"] == "result" })) >= k {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("abandoned call %d of %d was not answered within %s of the one before", k, n, mcptest.CallTimeout)
			}
		}
	}
	for k := 1; k <= n; k++ {
		waitAnswered(k)
	}
	resume := func(stream int) *mcptest.HTTPResponse {
		return srv.Do(http.MethodGet, "/mcp", map[string]string{"Mcp-Session-Id": sid, "Authorization": tok["Authorization"],
			"Accept": "text/event-stream", "Last-Event-ID": fmt.Sprintf("%d-0", stream)}, "")
	}
	// A stream whose answer was written before its client left is gone;
	// together the others hold no more than the bound and one answer.
	kept := 0
	for stream := 2; stream <= n+1; stream++ {
		if r := resume(stream); r.Status == 200 {
			kept += len(r.Body)
		}
	}
	if kept > 16<<20+64<<10 {
		t.Fatalf("the session kept %d bytes of %d abandoned 1 MiB answers", kept, n)
	}
}

// A second GET of a session's standalone stream takes it over, and the
// first GET's response ends: a client cannot hold any number of them open
// on the server.
func TestServeSecondGetEndsTheFirst(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(tok)
	get := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Authorization", tok["Authorization"])
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("GET: %v %v", res, err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	first := get()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		buf := make([]byte, 4096)
		for {
			if _, err := first.Body.Read(buf); err != nil {
				return
			}
		}
	}()
	get()
	select {
	case <-ended:
	case <-time.After(mcptest.CallTimeout):
		t.Fatal("the first GET is still open after a second took its stream over")
	}
}

// A cancellation the relay does not take (its requestId under a name that
// differs in letter case, which the relay drops) does not free the
// request's slot either: the call is still running upstream.
func TestServeCancelTheRelayDropsKeepsTheSlot(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--max-session-calls", "1"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*", "mcp:slow:*"))
	sid := srv.Initialize(tok)
	st := srv.PostStream(sid, tok, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"slow","arguments":{"steps":40,"delay_ms":100},"_meta":{"progressToken":"a"}}}`)
	if m := st.Next(); m["method"] != "notifications/progress" {
		t.Fatalf("first message %v, want progress", m)
	}
	for _, cancel := range []string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"RequestId":"a"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b","requestID":"a"}}`,
	} {
		srv.Post(sid, tok, cancel)
		if r := srv.Post(sid, tok, mcptest.CallBody("2", "echo", map[string]any{"text": "second"})); r.Status != 429 {
			t.Fatalf("after %s, a second call over --max-session-calls 1 while the first runs: HTTP %d %s", cancel, r.Status, r.Body)
		}
	}
	var last map[string]any
	for m := st.Next(); m != nil; m = st.Next() {
		last = m
	}
	if !strings.Contains(mcptest.JSON(last["result"]), "done 40") {
		t.Fatalf("the first call ended with %v", last)
	}
}

// A session initialized with its own token is held to it: a call its
// token does not grant is refused even when the --token default would
// grant it, and a request presenting the default's holder (no
// Authorization) in that session is refused outright.
func TestServeSessionTokenIsNotTheDefault(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:echo:*", "mcp:slow:*")})
	narrow := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(narrow)
	r := srv.Post(sid, narrow, mcptest.CallBody("1", "slow", map[string]any{"steps": 0}))
	if ms := r.Messages(); len(ms) != 1 || !strings.Contains(mcptest.JSON(ms[0]["error"]), "-32001") {
		t.Fatalf("slow under a session token that does not grant it: %s", r.Body)
	}
	if r := srv.Do(http.MethodPost, "/mcp", map[string]string{"Mcp-Session-Id": sid}, mcptest.CallBody("2", "slow", map[string]any{"steps": 0})); r.Status != 403 {
		t.Fatalf("a request without the session's Authorization: HTTP %d %s", r.Status, r.Body)
	}
}
