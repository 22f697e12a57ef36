package serve_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/internal/mcptest"
)

func TestMain(m *testing.M) { os.Exit(mcptest.Run(m)) }

// connect connects mcp-go's Streamable HTTP client to srv with headers,
// on the legacy protocol (sessions) unless modern.
func connect(t *testing.T, srv *mcptest.Server, headers map[string]string, modern bool, opts ...client.ClientOption) *client.Client {
	t.Helper()
	return connectWith(t, srv, []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(headers)}, modern, opts...)
}

func connectWith(t *testing.T, srv *mcptest.Server, topts []transport.StreamableHTTPCOption, modern bool, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(srv.URL, topts...)
	if err != nil {
		t.Fatal(err)
	}
	if !modern {
		opts = append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	} else {
		opts = append(opts, client.WithDiscoverTimeout(-1))
	}
	c := client.NewClient(tr, opts...)
	ctx := mcptest.Context(t)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	res, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "servetest", Version: "0"}}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if modern != mcp.IsModernProtocol(res.ProtocolVersion) {
		t.Fatalf("negotiated %s", res.ProtocolVersion)
	}
	return c
}

func call(t *testing.T, c *client.Client, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	return c.CallTool(mcptest.Context(t), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
}

func text(r *mcp.CallToolResult) string {
	if r == nil || len(r.Content) == 0 {
		return ""
	}
	if tc, ok := r.Content[0].(mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// The gate decides calls made through mcp-go's Streamable HTTP client,
// with the session's token in its Authorization header: the same view of
// the tools and the same denial as through the stdio proxy, and each
// decision logged.
func TestServeGatesMCPGoClient(t *testing.T) {
	for _, modern := range []bool{false, true} {
		t.Run(fmt.Sprintf("modern=%v", modern), func(t *testing.T) {
			e := mcptest.NewEnv(t)
			srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
			tok := e.Mint(nil, "mcp:echo:*", "docs:read:/project/**")
			c := connect(t, srv, mcptest.Bearer(tok), modern)

			tools, err := c.ListTools(mcptest.Context(t), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			if got := strings.Join(names, ","); !strings.Contains(got, "echo") || strings.Contains(got, "write_file") || strings.Contains(got, "crash") {
				t.Errorf("tools/list shows %s: want the token's view (echo and the read tools only)", got)
			}
			res, err := call(t, c, "echo", map[string]any{"text": "through http"})
			if err != nil || text(res) != "through http" {
				t.Fatalf("echo: %v %v", res, err)
			}
			_, err = call(t, c, "write_file", map[string]any{"path": "/project/x.md", "content": "no"})
			if err == nil || !strings.Contains(err.Error(), "DCT verification failed") {
				t.Fatalf("write_file: want the gate's -32001 denial, got %v", err)
			}
			srv.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "write_file" && m["allowed"] == false })
		})
	}
}

// A session without a header token uses the server's --token; a request
// may carry its own in params._delegateos, decided like any other.
func TestServeServerTokenAndPerRequestToken(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:echo:*")})
	sid := srv.Initialize(nil)
	if r := srv.Post(sid, nil, mcptest.CallBody("1", "echo", map[string]any{"text": "a"})); !strings.Contains(string(r.Body), `"result"`) {
		t.Fatalf("echo under --token: %s", r.Body)
	}
	r := srv.Post(sid, nil, mcptest.CallBody("2", "slow", map[string]any{"steps": 0}))
	if ms := r.Messages(); len(ms) != 1 || ms[0]["error"] == nil {
		t.Fatalf("slow under a token that does not grant it: %s", r.Body)
	}
	own := e.Mint(nil, "mcp:slow:*")
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{"steps":0},"_delegateos":{"dct":%q}}}`, own.String())
	if r := srv.Post(sid, nil, body); !strings.Contains(string(r.Body), `"done 0"`) {
		t.Fatalf("slow with its own token in _delegateos: %s", r.Body)
	}
}

// Sampling, elicitation and roots requests from the upstream reach the
// client, and its answers go back; progress arrives.
func TestServeServerRequestsProgressCancel(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	tok := e.Mint(nil, "mcp:sample:*", "mcp:elicit:*", "mcp:roots:*", "mcp:slow:*")
	sampler := &mcptest.Sampler{}
	var mu sync.Mutex
	var progress []float64
	// With the standalone GET stream open: the docserver sends a call's
	// last progress notification after its response, when the call's own
	// stream has ended, and such a message goes to the standalone stream.
	//lint:ignore SA1019 this session is on the legacy protocol, whose standalone GET stream the test needs
	listen := transport.WithContinuousListening()
	c := connectWith(t, srv, []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(mcptest.Bearer(tok)), listen}, false,
		client.WithSamplingHandler(sampler),
		client.WithElicitationHandler(mcptest.Elicitor{}),
		client.WithRootsHandler(mcptest.Roots{{URI: "file:///work", Name: "work"}}))
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			mu.Lock()
			p, _ := n.Params.AdditionalFields["progress"].(float64)
			progress = append(progress, p)
			mu.Unlock()
		}
	})
	res, err := call(t, c, "sample", map[string]any{"prompt": "what is 2+2"})
	if err != nil || res.IsError || len(sampler.Seen()) != 1 {
		t.Fatalf("sample: %v %v (sampler saw %v)", res, err, sampler.Seen())
	}
	res, err = call(t, c, "elicit", map[string]any{"message": "name?"})
	if err != nil || res.IsError {
		t.Fatalf("elicit: %v %v", res, err)
	}
	res, err = call(t, c, "roots", nil)
	if err != nil || !strings.Contains(text(res), "file:///work") {
		t.Fatalf("roots: %v %v", res, err)
	}
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 3, "delay_ms": 10}}}
	req.Params.Meta = &mcp.Meta{ProgressToken: "p7"}
	if res, err := c.CallTool(mcptest.Context(t), req); err != nil || text(res) != "done 3" {
		t.Fatalf("slow: %v %v", res, err)
	}
	// Notifications are handed to the handler apart from the response, and
	// from two streams (the POST's and the standalone GET) read by
	// different goroutines, so in any order.
	mcptest.Eventually(t, "progress 1, 2, 3", func() bool {
		mu.Lock()
		defer mu.Unlock()
		got := slices.Clone(progress)
		slices.Sort(got)
		return fmt.Sprint(got) == "[1 2 3]"
	})
}

// A client on the legacy protocol cancels with notifications/cancelled:
// the upstream stops, the call is settled as cancelled and its stream
// ends. On 2026-07-28 (mcp-go's default) closing the request's stream is
// the cancellation, and does the same.
func TestServeCancellation(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:slow:*"))
	sid := srv.Initialize(tok)
	slow := `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"slow","arguments":{"steps":200,"delay_ms":50},"_meta":{"progressToken":"c1"}}}`
	st := srv.PostStream(sid, tok, slow)
	if m := st.Next(); m["method"] != "notifications/progress" {
		t.Fatalf("first message %v, want progress", m)
	}
	if r := srv.Post(sid, tok, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1"}}`); r.Status != 202 {
		t.Fatalf("notifications/cancelled: HTTP %d", r.Status)
	}
	srv.WaitLog("upstream stderr", mcptest.UpstreamLogged("slow: cancelled"))
	srv.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "slow" && m["outcome"] == "cancelled" })

	c := connect(t, srv, tok, true)
	ctx, cancel := context.WithCancel(mcptest.Context(t))
	done := make(chan error, 1)
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 200, "delay_ms": 50}}}
	req.Params.Meta = &mcp.Meta{ProgressToken: "m1"}
	started := make(chan struct{}, 1)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	})
	go func() {
		_, err := c.CallTool(ctx, req)
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(mcptest.CallTimeout):
		t.Fatal("no progress from the modern call")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	mcptest.Eventually(t, "the second call to be cancelled upstream", func() bool {
		return len(srv.LogWith("upstream stderr", mcptest.UpstreamLogged("slow: cancelled"))) == 2
	})
}

// The server refuses what an attacker sends before it reaches any
// session: another Host or Origin, a huge body, a batch, a request in
// another client's session, a request after DELETE, a second request with
// an id in flight.
func TestServeRefusesAttacks(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--max-session-calls", "2", "--max-body-bytes", "65536"}})
	alice := mcptest.Bearer(e.Mint(nil, "mcp:echo:*", "mcp:slow:*"))
	mallory := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(alice)
	echo := mcptest.CallBody("1", "echo", map[string]any{"text": "x"})

	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		body   string
		status int
	}{
		{"DNS rebinding: foreign Host", map[string]string{"Host": "evil.example.com"}, echo, 403},
		{"foreign Origin", map[string]string{"Origin": "http://evil.example.com"}, echo, 403},
		{"Origin with the right name in its userinfo", map[string]string{"Origin": "http://127.0.0.1@evil.example.com"}, echo, 403},
		{"Origin null", map[string]string{"Origin": "null"}, echo, 403},
		{"Origin on a look-alike host", map[string]string{"Origin": "http://localhost.evil.example.com"}, echo, 403},
		{"Host with a look-alike suffix", map[string]string{"Host": "127.0.0.1.evil.example.com"}, echo, 403},
		{"another client's session", mallory, echo, 403},
		{"no credential in a session created with one", map[string]string{}, echo, 403},
		{"a session that does not exist", map[string]string{"Mcp-Session-Id": "00000000000000000000000000000000"}, echo, 404},
		{"a batch", nil, "[" + echo + "]", 400},
		{"not JSON", nil, `{"jsonrpc":"2.0",`, 400},
		{"an ambiguous message", nil, `{"jsonrpc":"2.0","id":5,"method":"tools/call","method":"ping"}`, 400},
		{"an unknown protocol version", map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, echo, 400},
		{"a huge body", nil, `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":"` + strings.Repeat("a", 100<<10) + `"}}`, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Mcp-Session-Id": sid}
			for k, v := range alice {
				h[k] = v
			}
			for k, v := range tc.hdr {
				h[k] = v
			}
			if tc.name == "no credential in a session created with one" {
				delete(h, "Authorization")
			}
			r := srv.Do(http.MethodPost, "/mcp", h, tc.body)
			if r.Status != tc.status {
				t.Fatalf("HTTP %d (%s), want %d", r.Status, r.Body, tc.status)
			}
		})
	}
	// A browser page on an allowed origin is served.
	h := map[string]string{"Mcp-Session-Id": sid, "Origin": "http://localhost:1234"}
	for k, v := range alice {
		h[k] = v
	}
	if r := srv.Do(http.MethodPost, "/mcp", h, echo); r.Status != 200 {
		t.Fatalf("allowed origin: HTTP %d %s", r.Status, r.Body)
	}
	// Another client cannot read alice's streams, or end her session.
	m := map[string]string{"Mcp-Session-Id": sid, "Accept": "text/event-stream"}
	for k, v := range mallory {
		m[k] = v
	}
	if r := srv.Do(http.MethodGet, "/mcp", m, ""); r.Status != 403 {
		t.Fatalf("GET of another's stream: HTTP %d", r.Status)
	}
	m["Last-Event-ID"] = "1-0"
	if r := srv.Do(http.MethodGet, "/mcp", m, ""); r.Status != 403 {
		t.Fatalf("resuming another's stream: HTTP %d", r.Status)
	}
	if r := srv.Do(http.MethodDelete, "/mcp", m, ""); r.Status != 403 {
		t.Fatalf("DELETE of another's session: HTTP %d", r.Status)
	}

	// A second request with an id in flight is refused; the first is not
	// disturbed. The session's limit on calls in flight holds.
	slow := func(id string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"slow","arguments":{"steps":40,"delay_ms":100},"_meta":{"progressToken":%s}}}`, id, id)
	}
	first := srv.PostStream(sid, alice, slow("7"))
	if m := first.Next(); m["method"] != "notifications/progress" {
		t.Fatalf("first call: %v", m)
	}
	if r := srv.Post(sid, alice, mcptest.CallBody("7", "echo", map[string]any{"text": "dup"})); r.Status != 409 {
		t.Fatalf("a duplicate id in flight: HTTP %d %s", r.Status, r.Body)
	}
	second := srv.PostStream(sid, alice, slow("8"))
	if m := second.Next(); m["method"] != "notifications/progress" {
		t.Fatalf("second call: %v", m)
	}
	if r := srv.Post(sid, alice, mcptest.CallBody("9", "echo", map[string]any{"text": "third"})); r.Status != 429 {
		t.Fatalf("a third call over --max-session-calls 2: HTTP %d %s", r.Status, r.Body)
	}
	for _, st := range []*mcptest.Stream{first, second} {
		var last map[string]any
		for m := st.Next(); m != nil; m = st.Next() {
			last = m
		}
		if !strings.Contains(fmt.Sprint(last["result"]), "done 40") {
			t.Fatalf("a call in flight was disturbed: %v", last)
		}
	}

	// After DELETE the session is gone, and so is its upstream.
	pid := upstreamPID(t, srv)
	if r := srv.Do(http.MethodDelete, "/mcp", map[string]string{"Mcp-Session-Id": sid, "Authorization": alice["Authorization"]}, ""); r.Status != 204 {
		t.Fatalf("DELETE: HTTP %d", r.Status)
	}
	if r := srv.Post(sid, alice, echo); r.Status != 404 {
		t.Fatalf("a request after DELETE: HTTP %d %s", r.Status, r.Body)
	}
	mcptest.Eventually(t, "the upstream to exit", func() bool { return !alive(pid) })
}

// upstreamPID is the pid of the latest upstream the server started.
func upstreamPID(t *testing.T, srv *mcptest.Server) int {
	t.Helper()
	srv.WaitLog("upstream started", nil)
	ls := srv.LogWith("upstream started", nil)
	pid, _ := ls[len(ls)-1]["pid"].(float64)
	return int(pid)
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// A client that sends its headers too slowly is cut off, and one that
// stalls in its body too.
func TestServeSlowClients(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--read-timeout", "500ms"}})
	for _, partial := range []string{
		"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n",
		"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"",
	} {
		conn := dial(t, srv.Addr)
		if _, err := conn.Write([]byte(partial)); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(mcptest.WaitTimeout))
		buf := make([]byte, 4096)
		for {
			if _, err := conn.Read(buf); err != nil {
				if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
					t.Fatalf("the server kept a stalled connection open: %q", partial)
				}
				break
			}
		}
		conn.Close()
	}
}

// An upstream that crashes fails its own session's call with a clear
// error; the session is then gone, other sessions go on, and a new session
// gets a new upstream.
func TestServeUpstreamCrash(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*", "mcp:crash:*"))
	victim := srv.Initialize(tok)
	bystander := srv.Initialize(tok)
	r := srv.Post(victim, tok, mcptest.CallBody("1", "crash", nil))
	ms := r.Messages()
	if len(ms) == 0 || ms[len(ms)-1]["error"] == nil || !strings.Contains(string(r.Body), "upstream MCP server exited") {
		t.Fatalf("the crashed call's answer: %s", r.Body)
	}
	mcptest.Eventually(t, "the session to end", func() bool {
		return srv.Post(victim, tok, mcptest.CallBody("2", "echo", map[string]any{"text": "x"})).Status == 404
	})
	if r := srv.Post(bystander, tok, mcptest.CallBody("3", "echo", map[string]any{"text": "still here"})); !strings.Contains(string(r.Body), "still here") {
		t.Fatalf("another session after the crash: %s", r.Body)
	}
	fresh := srv.Initialize(tok)
	if r := srv.Post(fresh, tok, mcptest.CallBody("4", "echo", map[string]any{"text": "new"})); !strings.Contains(string(r.Body), `"new"`) {
		t.Fatalf("a new session after the crash: %s", r.Body)
	}
	mcptest.Eventually(t, "three upstreams, one per session", func() bool {
		return len(srv.LogWith("upstream started", nil)) == 3
	})
}

// An idle session is reaped with its upstream.
func TestServeReapsIdleSessions(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--idle-timeout", "2s"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(tok)
	pid := upstreamPID(t, srv)
	mcptest.Eventually(t, "the idle session's upstream to exit", func() bool { return !alive(pid) })
	if r := srv.Post(sid, tok, mcptest.CallBody("1", "echo", map[string]any{"text": "x"})); r.Status != 404 {
		t.Fatalf("a reaped session: HTTP %d", r.Status)
	}
}

// A session is idle from the end of its last request: a call longer than
// the idle timeout does not leave the session to be reaped the moment it
// ends.
func TestServeIdleFromTheEndOfTheLastCall(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--idle-timeout", "1s"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*", "mcp:slow:*"))
	sid := srv.Initialize(tok)
	r := srv.Post(sid, tok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"steps":15,"delay_ms":100}}}`)
	if !strings.Contains(string(r.Body), "done 15") {
		t.Fatalf("the long call: HTTP %d %s", r.Status, r.Body)
	}
	ended := time.Now()
	time.Sleep(400 * time.Millisecond) // more than a tick of the reaper
	r = srv.Post(sid, tok, mcptest.CallBody("2", "echo", map[string]any{"text": "still here"}))
	if since := time.Since(ended); r.Status != 200 && since < time.Second {
		t.Fatalf("a call %v after a long call ended: HTTP %d %s", since, r.Status, r.Body)
	}
}

// SIGTERM lets a call in flight finish, settles its spend, refuses new
// sessions meanwhile, and exits 0 with every upstream gone.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	e := mcptest.NewEnv(t)
	store := e.Dir + "/spend.json"
	pol := e.Policy(mcptest.Priced("slow", 700))
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--spend-store", store}})
	tok := e.Mint(mcptest.Budget(10000), "mcp:slow:*")
	sid := srv.Initialize(mcptest.Bearer(tok))
	st := srv.PostStream(sid, mcptest.Bearer(tok), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"steps":40,"delay_ms":100},"_meta":{"progressToken":1}}}`)
	if m := st.Next(); m["method"] != "notifications/progress" {
		t.Fatalf("first message %v, want progress", m)
	}
	srv.Signal(syscall.SIGTERM)
	srv.WaitLog("draining", nil)
	if r := srv.Do(http.MethodGet, "/readyz", nil, ""); r.Status != 503 {
		t.Errorf("readyz while draining: HTTP %d", r.Status)
	}
	if r := srv.Do(http.MethodPost, "/mcp", mcptest.Bearer(tok), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`); r.Status != 503 {
		t.Errorf("a new session while draining: HTTP %d", r.Status)
	}
	var last map[string]any
	for m := st.Next(); m != nil; m = st.Next() {
		last = m
	}
	if !strings.Contains(fmt.Sprint(last["result"]), "done 40") {
		t.Fatalf("the call in flight at SIGTERM ended with %v", last)
	}
	if !srv.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("serve did not exit after draining")
	}
	out, _, code := mcptest.CLI(t, "spend", "--store", store, "--json")
	if code != 0 || !strings.Contains(out, "700") {
		t.Fatalf("spend after the drain (exit %d): %s", code, out)
	}
}

// The health endpoints answer; /readyz says ready.
func TestServeHealth(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := srv.Do(http.MethodGet, p, nil, ""); r.Status != 200 {
			t.Errorf("%s: HTTP %d", p, r.Status)
		}
	}
}

// A client that lost a call's stream resumes it with Last-Event-ID and
// gets the events it missed, then the response.
func TestServeResumesStream(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:slow:*"))
	sid := srv.Initialize(tok)
	body := `{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{"name":"slow","arguments":{"steps":6,"delay_ms":100},"_meta":{"progressToken":"pt"}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Authorization", tok["Authorization"])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read up to the first progress event, then drop the connection.
	var lastID string
	buf := make([]byte, 1)
	var line []byte
	for lastID == "" || !strings.HasSuffix(lastID, "-1") {
		if _, err := res.Body.Read(buf); err != nil {
			t.Fatalf("the stream ended early: %v", err)
		}
		if buf[0] != '\n' {
			line = append(line, buf[0])
			continue
		}
		if id, ok := strings.CutPrefix(string(line), "id: "); ok {
			lastID = id
		}
		line = line[:0]
	}
	res.Body.Close()
	r := srv.Do(http.MethodGet, "/mcp", map[string]string{"Mcp-Session-Id": sid, "Authorization": tok["Authorization"], "Accept": "text/event-stream", "Last-Event-ID": lastID}, "")
	ms := r.Messages()
	var progress []any
	for _, m := range ms {
		if m["method"] == "notifications/progress" {
			progress = append(progress, m["params"].(map[string]any)["progress"])
		}
	}
	if len(ms) == 0 || !strings.Contains(fmt.Sprint(ms[len(ms)-1]["result"]), "done 6") {
		t.Fatalf("the resumed stream did not end with the response: %s", r.Body)
	}
	// The docserver may send a call's last progress after its response,
	// too late for the call's stream: 2 to 5 must be there, in order.
	if got := fmt.Sprint(progress); got != "[2 3 4 5]" && got != "[2 3 4 5 6]" {
		t.Fatalf("progress on the resumed stream %v, want 2 to 5 or 6 (1 was seen before the drop)", progress)
	}
	// The stream was delivered: it cannot be replayed again.
	again := srv.Do(http.MethodGet, "/mcp", map[string]string{"Mcp-Session-Id": sid, "Authorization": tok["Authorization"], "Accept": "text/event-stream", "Last-Event-ID": lastID}, "")
	if again.Status != 404 {
		t.Fatalf("replaying a delivered stream: HTTP %d", again.Status)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// A forged token in the Authorization header, or none when the server has
// no default token, is refused when the session starts (no upstream is
// started for it); headers over the limit are refused.
func TestServeRefusesBadCredentialsAndHugeHeaders(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	other := mcptest.NewEnv(t) // another root: its tokens are not trusted here
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for name, hdr := range map[string]map[string]string{
		"untrusted root": mcptest.Bearer(other.Mint(nil, "mcp:*:*")),
		"not a token":    {"Authorization": "Bearer not-a-token"},
		"not bearer":     {"Authorization": "Basic dXNlcjpwYXNz"},
		"no token":       {},
	} {
		if r := srv.Do(http.MethodPost, "/mcp", hdr, init); r.Status != 401 || r.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: HTTP %d, session %q: %s", name, r.Status, r.Header.Get("Mcp-Session-Id"), r.Body)
		}
	}
	if r := srv.Do(http.MethodPost, "/mcp", map[string]string{"X-Padding": strings.Repeat("a", 64<<10)}, init); r.Status != 431 {
		t.Errorf("64 KiB of headers: HTTP %d", r.Status)
	}
	if n := len(srv.LogWith("upstream started", nil)); n != 0 {
		t.Errorf("%d upstreams started for refused sessions", n)
	}
}

// Stateless requests (MCP 2026-07-28, no Mcp-Session-Id) are served by a
// relay per credential: each sees its own token's view, never another's.
func TestServeStatelessPerCredential(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	echoOnly := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	slowOnly := mcptest.Bearer(e.Mint(nil, "mcp:slow:*"))
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`
	for _, tc := range []struct {
		hdr        map[string]string
		want, not_ string
	}{{echoOnly, `"echo"`, `"slow"`}, {slowOnly, `"slow"`, `"echo"`}, {echoOnly, `"echo"`, `"slow"`}} {
		h := map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
		for k, v := range tc.hdr {
			h[k] = v
		}
		r := srv.Do(http.MethodPost, "/mcp", h, list)
		if r.Status != 200 || r.Header.Get("Mcp-Session-Id") != "" || !strings.Contains(string(r.Body), tc.want) || strings.Contains(string(r.Body), tc.not_) {
			t.Fatalf("stateless tools/list: HTTP %d, session %q: %s", r.Status, r.Header.Get("Mcp-Session-Id"), r.Body)
		}
	}
	mcptest.Eventually(t, "one upstream per credential", func() bool {
		return len(srv.LogWith("upstream started", nil)) == 2
	})
	// Without the stateless marker, a request without a session is refused.
	if r := srv.Do(http.MethodPost, "/mcp", echoOnly, list); r.Status != 400 {
		t.Fatalf("a request without a session and without 2026-07-28: HTTP %d", r.Status)
	}
}

// A client that abandons its requests (closes each before the answer)
// cannot make the session keep their answers without bound: the newest
// are kept for it to resume, the oldest dropped.
func TestServeBoundsAbandonedAnswers(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--max-session-calls", "200"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:slow:*"))
	sid := srv.Initialize(tok) // stream 1
	const n = 70
	for i := range n { // streams 2 to n+1
		st := srv.PostStream(sid, tok, mcptest.CallBody(fmt.Sprint(i+1), "slow", map[string]any{"steps": 1, "delay_ms": 300}))
		st.Close()
	}
	mcptest.Eventually(t, "every abandoned call answered", func() bool {
		return len(srv.LogWith("decision", func(m map[string]any) bool { return m["tool"] == "slow" && m["outcome"] == "result" })) == n
	})
	resume := func(stream int) *mcptest.HTTPResponse {
		return srv.Do(http.MethodGet, "/mcp", map[string]string{"Mcp-Session-Id": sid, "Authorization": tok["Authorization"],
			"Accept": "text/event-stream", "Last-Event-ID": fmt.Sprintf("%d-0", stream)}, "")
	}
	if r := resume(2); r.Status != 404 {
		t.Fatalf("the oldest abandoned answer: HTTP %d, want it dropped", r.Status)
	}
	r := resume(n + 1)
	if ms := r.Messages(); r.Status != 200 || len(ms) != 1 || !strings.Contains(mcptest.JSON(ms[0]["result"]), "done 1") {
		t.Fatalf("the newest abandoned answer: HTTP %d %s", r.Status, r.Body)
	}
}

// A command line serve cannot run is refused before it listens: an
// upstream that does not exist, half of TLS, both kinds of upstream.
func TestServeRefusesBadCommandLines(t *testing.T) {
	e := mcptest.NewEnv(t)
	root := e.Root.ID()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--root", root, "--", "/nonexistent/upstream"}, "no such file"},
		{[]string{"serve", "--root", root, "--tls-cert", "c.pem", "--", "true"}, "--tls-cert and --tls-key go together"},
		{[]string{"serve", "--root", root, "--upstream-url", "http://127.0.0.1:1/mcp", "--", "true"}, "not both"},
		{[]string{"serve", "--root", root, "--upstream-url", "ftp://x/mcp"}, "http:// or https://"},
		{[]string{"serve", "--root", root, "--listen", "nonsense", "--", "true"}, "--listen"},
	} {
		_, stderr, code := mcptest.CLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// An upstream that never reads or answers holds neither its client for
// ever nor the server's exit: after --drain-timeout its call is answered
// with an error and the server exits 0, the upstream gone.
func TestServeDrainsPastAStuckUpstream(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Upstream: []string{"sleep", "600"}, Flags: []string{"--drain-timeout", "300ms"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	st := srv.PostStream("", tok, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	srv.WaitLog("upstream started", nil)
	srv.Signal(syscall.SIGTERM)
	m := st.Next()
	if m == nil || !strings.Contains(mcptest.JSON(m["error"]), "shutting down") {
		t.Fatalf("the stuck call's answer: %v", m)
	}
	if !srv.WaitExit(mcptest.CallTimeout) {
		t.Fatal("serve did not exit")
	}
}

// --max-calls bounds the requests in flight across sessions, and
// --max-sessions the sessions.
func TestServeGlobalLimits(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--max-calls", "1", "--max-sessions", "2"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*", "mcp:slow:*"))
	a, b := srv.Initialize(tok), srv.Initialize(tok)
	st := srv.PostStream(a, tok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"steps":40,"delay_ms":100},"_meta":{"progressToken":1}}}`)
	if m := st.Next(); m["method"] != "notifications/progress" {
		t.Fatalf("first message %v", m)
	}
	if r := srv.Post(b, tok, mcptest.CallBody("1", "echo", map[string]any{"text": "x"})); r.Status != 429 {
		t.Fatalf("a call in another session over --max-calls 1: HTTP %d %s", r.Status, r.Body)
	}
	for m := st.Next(); m != nil; m = st.Next() {
	}
	if r := srv.Post(b, tok, mcptest.CallBody("2", "echo", map[string]any{"text": "x"})); r.Status != 200 {
		t.Fatalf("a call once the first ended: HTTP %d %s", r.Status, r.Body)
	}
	r := srv.Do(http.MethodPost, "/mcp", tok, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if r.Status != 503 {
		t.Fatalf("a third session over --max-sessions 2: HTTP %d", r.Status)
	}
	if r := srv.Do(http.MethodGet, "/readyz", nil, ""); r.Status != 503 {
		t.Fatalf("readyz at the session limit: HTTP %d", r.Status)
	}
}
