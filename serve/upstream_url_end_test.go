package serve_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// httpUpstream is a minimal MCP Streamable HTTP server: it answers every
// request with a JSON body at once, records the sessions it opened and
// ended, and answers 404 in the sessions it was told to forget.
type httpUpstream struct {
	mu        sync.Mutex
	sessions  []string
	deleted   map[string]bool
	forgotten map[string]bool
}

func (u *httpUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	u.mu.Lock()
	forgotten := u.forgotten[sid]
	if r.Method == http.MethodDelete && sid != "" {
		u.deleted[sid] = true
	}
	u.mu.Unlock()
	switch {
	case forgotten:
		http.Error(w, "no such session", http.StatusNotFound)
		return
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	case r.Method != http.MethodPost:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, _ := io.ReadAll(r.Body)
	if json.Unmarshal(body, &m) != nil || m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result := `{}`
	switch m.Method {
	case "initialize":
		sid = fmt.Sprintf("up-%d", len(u.sessions))
		u.mu.Lock()
		u.sessions = append(u.sessions, sid)
		u.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", sid)
		result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"up","version":"1"}}`
	case "tools/call":
		result = `{"content":[{"type":"text","text":"up says hi"}]}`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
}

func (u *httpUpstream) forget(sid string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.forgotten[sid] = true
}

func (u *httpUpstream) wasDeleted(sid string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.deleted[sid]
}

func (u *httpUpstream) opened() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.sessions...)
}

func startHTTPUpstream(t *testing.T) (*httpUpstream, string) {
	u := &httpUpstream{deleted: map[string]bool{}, forgotten: map[string]bool{}}
	hs := httptest.NewServer(u)
	t.Cleanup(hs.Close)
	return u, hs.URL + "/mcp"
}

// An HTTP upstream that ends a session (404) is, for that session, an
// upstream that exited: the call is answered with an error and the session
// ends, while other sessions go on; a session the client deletes, and every
// session on SIGTERM, ends its upstream session with DELETE.
func TestServeUpstreamURLSessionEnds(t *testing.T) {
	u, url := startHTTPUpstream(t)
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), UpstreamURL: url})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	victim := srv.Initialize(tok)
	bystander := srv.Initialize(tok)
	deleted := srv.Initialize(tok)
	ups := u.opened()
	if len(ups) != 3 {
		t.Fatalf("%d upstream sessions for 3 sessions", len(ups))
	}

	u.forget(ups[0])
	r := srv.Post(victim, tok, mcptest.CallBody("1", "echo", map[string]any{"text": "x"}))
	if !strings.Contains(string(r.Body), "ended the session") {
		t.Fatalf("a call in a session the upstream ended: %s", r.Body)
	}
	mcptest.Eventually(t, "the session to end", func() bool {
		return srv.Post(victim, tok, mcptest.CallBody("2", "echo", map[string]any{"text": "x"})).Status == http.StatusNotFound
	})
	srv.WaitLog("upstream exited", func(m map[string]any) bool { return strings.Contains(fmt.Sprint(m["error"]), "HTTP 404") })
	if r := srv.Post(bystander, tok, mcptest.CallBody("3", "echo", map[string]any{"text": "x"})); !strings.Contains(string(r.Body), "up says hi") {
		t.Fatalf("another session after one ended: %s", r.Body)
	}

	if r := srv.Do(http.MethodDelete, "/mcp", map[string]string{"Mcp-Session-Id": deleted, "Authorization": tok["Authorization"]}, ""); r.Status >= 300 {
		t.Fatalf("DELETE: HTTP %d: %s", r.Status, r.Body)
	}
	mcptest.Eventually(t, "the deleted session's upstream session to be ended", func() bool { return u.wasDeleted(ups[2]) })
	if u.wasDeleted(ups[1]) {
		t.Fatal("a live session's upstream session was ended")
	}

	srv.Signal(syscall.SIGTERM)
	if !srv.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("serve did not exit after SIGTERM")
	}
	if !u.wasDeleted(ups[1]) {
		t.Fatal("the drain did not end the live session's upstream session")
	}
}
