package serve_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// slowUpstream is an MCP Streamable HTTP server that answers requests at
// once but holds every notifications/roots/list_changed until the test
// ends: a slow server, as a flooding client sees it.
type slowUpstream struct {
	held    atomic.Int64 // list_changed notifications received
	release chan struct{}
	n       atomic.Int64
}

func (u *slowUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &m)
	if m.ID == nil {
		if m.Method == "notifications/roots/list_changed" {
			u.held.Add(1)
			select {
			case <-u.release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result := `{}`
	switch m.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", fmt.Sprintf("slow-%d", u.n.Add(1)))
		result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"slow","version":"1"}}`
	case "tools/call":
		result = `{"content":[{"type":"text","text":"slow says hi"}]}`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
}

// metric reads one unlabelled sample from the server's /metrics.
func metric(t *testing.T, srv *mcptest.Server, name string) float64 {
	t.Helper()
	res, err := http.Get(srv.Base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

func openFDs(t *testing.T, pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// One session flooding notifications at a slow --upstream-url server holds
// a bounded queue, not a goroutine and a connection per notification: the
// server's goroutines and descriptors stay bounded, what does not fit is
// dropped and counted, and the session's own requests and other sessions
// go on.
func TestServeUpstreamURLNotificationFlood(t *testing.T) {
	u := &slowUpstream{release: make(chan struct{})}
	hs := httptest.NewServer(u)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(u.release) }) // before hs.Close, which waits for handlers
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), UpstreamURL: hs.URL + "/mcp"})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	flooder := srv.Initialize(tok)
	goroutines0 := metric(t, srv, "go_goroutines")
	fds0 := openFDs(t, srv.Cmd.Process.Pid)

	const flood = 2000
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	client := &http.Client{Timeout: mcptest.CallTimeout}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= flood {
				req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", tok["Authorization"])
				req.Header.Set("Mcp-Session-Id", flooder)
				res, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusAccepted {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d notifications were not accepted", n, flood)
	}
	// Every notification has reached the bridge: sent (and held by the
	// upstream), queued (at most the queue's 256) or dropped.
	mcptest.Eventually(t, "the flood to reach the bridge", func() bool {
		return float64(u.held.Load())+metric(t, srv, "delegateos_upstream_notifications_dropped_total")+256 >= flood
	})
	goroutines := metric(t, srv, "go_goroutines")
	fds := openFDs(t, srv.Cmd.Process.Pid)
	dropped := metric(t, srv, "delegateos_upstream_notifications_dropped_total")
	t.Logf("after %d notifications: goroutines %v → %v, descriptors %d → %d, upstream holds %d, dropped %v",
		flood, goroutines0, goroutines, fds0, fds, u.held.Load(), dropped)
	if goroutines > goroutines0+100 || fds > fds0+50 {
		t.Fatalf("a flood of %d notifications took the server from %v to %v goroutines, %d to %d descriptors", flood, goroutines0, goroutines, fds0, fds)
	}
	if held := u.held.Load(); held != 1 || dropped != flood-1-256 {
		t.Fatalf("the upstream holds %d notifications and %v were dropped: want 1 sent at a time and %d dropped", held, dropped, flood-1-256)
	}

	if r := srv.Post(flooder, tok, mcptest.CallBody("1", "echo", map[string]any{"text": "x"})); !strings.Contains(string(r.Body), "slow says hi") {
		t.Fatalf("a call in the flooding session: %s", r.Body)
	}
	other := srv.Initialize(tok)
	if r := srv.Post(other, tok, mcptest.CallBody("1", "echo", map[string]any{"text": "x"})); !strings.Contains(string(r.Body), "slow says hi") {
		t.Fatalf("a call in another session: %s", r.Body)
	}
}

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
