package serve_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// openGET opens the session's standalone GET stream and returns once the
// server has answered its headers (the stream is open); closing the
// returned function's result closes it.
func openGET(t *testing.T, srv *mcptest.Server, sid string, tok map[string]string) func() {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	for k, v := range tok {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: HTTP %d", res.StatusCode)
	}
	t.Cleanup(func() { res.Body.Close() })
	return func() { res.Body.Close() }
}

// A client that goes away without DELETE (the TypeScript SDK's close()
// and the Inspector send none) left its session and its upstream for the
// whole --idle-timeout (10 minutes). Now a session with no stream of its
// client's open and no request for --abandon-timeout is reaped with its
// upstream; one whose client holds its GET stream open is kept, and is
// reaped once that stream closes.
func TestServeReapsAbandonedSessions(t *testing.T) {
	e := mcptest.NewEnv(t)
	// Long enough that the held session's GET stream is open (one local
	// round trip after its initialize) well before it could count as
	// abandoned, however loaded the machine.
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--abandon-timeout", "2s"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))

	held := srv.Initialize(tok)
	closeGET := openGET(t, srv, held, tok)
	heldPID := sessionUpstreamPID(t, srv, held)

	gone := srv.Initialize(tok) // and never heard from again: no DELETE
	gonePID := sessionUpstreamPID(t, srv, gone)

	srv.WaitLog("closing the session", func(m map[string]any) bool {
		return m["session"] == gone[:8] && strings.Contains(m["reason"].(string), "had no stream open and sent nothing for 2s")
	})
	mcptest.Eventually(t, "the abandoned session's upstream to exit", func() bool { return !alive(gonePID) })
	if r := srv.Post(gone, tok, mcptest.CallBody("1", "echo", map[string]any{"text": "x"})); r.Status != http.StatusNotFound {
		t.Fatalf("a call in the reaped session: HTTP %d %s", r.Status, r.Body)
	}

	// The session whose client holds its GET stream was not reaped with
	// it, although it became abandoned no later.
	if r := srv.Post(held, tok, mcptest.CallBody("2", "echo", map[string]any{"text": "still here"})); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "still here") {
		t.Fatalf("a call in the session with its GET stream open: HTTP %d %s", r.Status, r.Body)
	}
	if !alive(heldPID) {
		t.Fatal("the upstream of the session with its GET stream open was stopped")
	}
	closeGET()
	srv.WaitLog("closing the session", func(m map[string]any) bool { return m["session"] == held[:8] })
	mcptest.Eventually(t, "the upstream of the session whose stream closed to exit", func() bool { return !alive(heldPID) })
}
