package serve_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// mutedUpstream never answers a tools/call: it holds the POST until its
// client gives it up, and counts the POSTs it holds.
type mutedUpstream struct {
	holding atomic.Int64
	calls   chan struct{} // one per tools/call received
}

func (u *mutedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &m)
	switch {
	case m.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "tools/call":
		u.holding.Add(1)
		defer u.holding.Add(-1)
		u.calls <- struct{}{}
		<-r.Context().Done()
	default:
		w.Header().Set("Mcp-Session-Id", "muted")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"muted","version":"1"}}}`, m.ID)
	}
}

// A client that cancels a call the upstream never answers, and repeats
// it, does not leave the bridge's POST of each cancelled call open: the
// cancellation ends it.
func TestServeUpstreamURLCancelEndsPost(t *testing.T) {
	u := &mutedUpstream{calls: make(chan struct{}, 100)}
	hs := httptest.NewServer(u)
	t.Cleanup(hs.Close)
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), UpstreamURL: hs.URL + "/mcp"})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(tok)
	const rounds = 20
	for range rounds {
		st := srv.PostStream(sid, tok, mcptest.CallBody(`"x"`, "echo", map[string]any{"text": "x"}))
		<-u.calls
		if r := srv.Post(sid, tok, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}`); r.Status != http.StatusAccepted {
			t.Fatalf("cancel: HTTP %d %s", r.Status, r.Body)
		}
		for m := st.Next(); m != nil; m = st.Next() {
		}
	}
	mcptest.Eventually(t, "the cancelled calls' POSTs to end", func() bool { return u.holding.Load() == 0 })
}
