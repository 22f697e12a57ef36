package serve_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// An HTTP upstream that floods a stream with one event that never ends
// does not make the session's bridge hold it all: past the frame limit the
// request is answered with an error.
func TestServeUpstreamURLFloodIsBounded(t *testing.T) {
	stop := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		// 1 MiB of one event's data, then nothing more until the test
		// ends: the event is never complete.
		w.Write([]byte("data: " + strings.Repeat("a", 1<<20)))
		w.(http.Flusher).Flush()
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(stop) })
	e := mcptest.NewEnv(t)
	pol := e.Policy()
	pol.MaxFrameBytes = 8 << 10
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, UpstreamURL: hs.URL + "/mcp"})
	st := srv.PostStream("", mcptest.Bearer(e.Mint(nil, "mcp:echo:*")), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if m := st.Next(); m == nil || m["error"] == nil {
		t.Fatalf("initialize against a flooding upstream: %v", m)
	}
}
