package serve_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// askingUpstream answers tools/call over SSE: it first asks the client
// roots/list, and answers the call only once the client's answer arrives.
type askingUpstream struct {
	answered chan int
	got      atomic.Int64 // answers received (the call handler takes answered's)
}

func (u *askingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &m)
	switch {
	case m.Method == "" && string(m.ID) == `"roots-1"`:
		u.got.Add(1)
		u.answered <- len(body)
		w.WriteHeader(http.StatusAccepted)
	case m.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "initialize":
		w.Header().Set("Mcp-Session-Id", "asking-1")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"asking","version":"1"}}}`, m.ID)
	default:
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"roots-1\",\"method\":\"roots/list\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case n := <-u.answered:
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"got %d\"}]}}\n\n", m.ID, n)
		case <-r.Context().Done():
		}
	}
}

// Red team (issue 26 item 3, bullet 2): the client's answer to an
// --upstream-url upstream's request goes through the notification queue,
// and a frame over its 4 MiB is dropped (accepted 202, counted) although
// the queue is empty and the frame is within --max-body-bytes: the
// upstream waits for it for ever, and the client's call never ends.
// (Was TestRedteamUpstreamRequestAnswerDropped.)
func TestServeUpstreamURLLargeAnswerDelivered(t *testing.T) { upstreamAnswerDelivered(t, 5<<20) }

// The control: a small answer is delivered.
// (Was TestRedteamUpstreamRequestAnswerSmall.)
func TestServeUpstreamURLSmallAnswerDelivered(t *testing.T) { upstreamAnswerDelivered(t, 1<<10) }

func upstreamAnswerDelivered(t *testing.T, size int) {
	u := &askingUpstream{answered: make(chan int, 1)}
	hs := httptest.NewServer(u)
	t.Cleanup(hs.Close)
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), UpstreamURL: hs.URL + "/mcp"})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(tok)
	st := srv.PostStream(sid, tok, mcptest.CallBody("1", "echo", map[string]any{"text": "x"}))
	t.Cleanup(st.Close)
	ask := st.Next()
	if ask["method"] != "roots/list" {
		t.Fatalf("want roots/list from the upstream, got %v", ask)
	}
	uri := "file:///" + strings.Repeat("r", size)
	answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"roots":[{"uri":%q}]}}`, ask["id"], uri)
	if r := srv.Post(sid, tok, answer); r.Status != http.StatusAccepted {
		t.Fatalf("the answer: HTTP %d %s", r.Status, r.Body)
	}
	if size > 4<<20 {
		mcptest.Eventually(t, "the answer to be sent or dropped", func() bool {
			return u.got.Load() > 0 || metric(t, srv, "delegateos_upstream_notifications_dropped_total") > 0
		})
		if u.got.Load() == 0 {
			t.Fatalf("the %d-byte answer to the upstream's roots/list was dropped (delegateos_upstream_notifications_dropped_total %v): the upstream waits for it for ever", size, metric(t, srv, "delegateos_upstream_notifications_dropped_total"))
		}
	}
	got := st.Next()
	if res, _ := json.Marshal(got); !strings.Contains(string(res), "got ") {
		t.Fatalf("the call after its roots/list was answered: %s", res)
	}
}
