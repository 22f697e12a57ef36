//go:build unix

package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Frames that other line readers would split differently, or ids that
// other parsers read differently, must not let a client past the gate.
// Each case here was a working bypass against an earlier version.
// Found by reviews (was TestE2EReviewFindings).
func TestE2EFramingBypassesRefused(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "docs:read:/project/*/*", "mcp:echo:*", "mcp:slow:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok})
	c := p.Raw()
	c.Initialize()

	// A bare carriage return is a line end to Python's and Node's readers:
	// the "ping" would have hidden an ungated write_file from them.
	c.Send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":\r" +
		mcptest.CallFrame("2", "write_file", map[string]any{"path": "/project/secret.md", "content": "pwned"}) + "\r}")
	// It is answered under the id it reads as, so that its sender does not
	// wait.
	if m := c.Response("1"); m.Error == nil || m.Error.Code != -32700 || !strings.Contains(m.Error.Message, "carriage return") {
		t.Errorf("a frame with a bare CR was answered %+v; want -32700", m.Error)
	}

	// Ids other parsers read as another request's: refused ("01" is not
	// JSON at all: a parse error).
	for _, id := range []string{"1.0", "1e0", "-0", "01", "9007199254740992", `{"a":1}`, `"` + strings.Repeat("x", 300) + `"`} {
		c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
		want := -32600
		if id == "01" {
			want = -32700
		}
		if m := c.Response("null"); m.Error == nil || m.Error.Code != want {
			t.Errorf("id %.20s was answered %+v; want %d", id, m.Error, want)
		}
	}

	// A cancelled request leaves the table at once, and its id may be
	// used again; the cancelled call's late answer (the upstream knows it
	// by the relay's own id) is dropped, so it can never be taken for the
	// answer to the new request, nor settle (and release) it.
	c.Send(mcptest.CallFrame("7", "slow", map[string]any{"steps": 3, "delay_ms": 300}))
	c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	c.Send(mcptest.CallFrame("7", "echo", map[string]any{"text": "reused"}))
	if got := mcptest.ResultText(t, c.Response("7")); got != "reused" {
		t.Errorf("the request reusing a cancelled id was answered %q; want its own result", got)
	}

	// Nothing else may answer under id 7: not the cancelled slow call.
	response := func(id string) mcptest.RawMessage {
		t.Helper()
		for {
			m := c.Next()
			if m.Method != "" {
				continue
			}
			if string(m.ID) == "7" {
				t.Errorf("a second answer with id 7 reached the client: %+v", m)
				continue
			}
			if string(m.ID) != id {
				t.Fatalf("response with id %s, want %s", m.ID, id)
			}
			return m
		}
	}

	// A tools/call without an id is not forwarded at all.
	c.Send(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"as a notification"}}}`)

	// "*" never matches an empty segment: "/project//secret.md" is the
	// server's "/project/secret.md", outside "/project/*/*".
	for _, path := range []string{"/project//secret.md", "/project/sub/..\\secret.md", "/project/sub/%2e%2e/secret.md", "/project/sub/x\u0001"} {
		c.Send(mcptest.CallFrame("8", "read_file", map[string]any{"path": path}))
		m := response("8")
		if m.Error == nil || m.Error.Code != -32001 {
			t.Errorf("read_file %q was answered %+v; want -32001", path, m.Error)
		}
	}
	c.Send(mcptest.CallFrame("9", "read_file", map[string]any{"path": "/project/sub/notes.md"}))
	if got := mcptest.ResultText(t, response("9")); got == "" {
		t.Error("an allowed read after the refusals returned nothing")
	}
	c.Send(mcptest.CallFrame("10", "echo", map[string]any{"text": "last"}))
	if got := mcptest.ResultText(t, response("10")); got != "last" {
		t.Errorf("echo = %q", got)
	}
	// The slow call's late answer comes after about 900ms; a ping
	// after that is the next frame, with nothing under id 7 before it.
	deadline := time.Now().Add(10 * time.Second)
	for len(p.LogWith("upstream stderr", mcptest.UpstreamLogged("tool=slow"))) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	c.Send(`{"jsonrpc":"2.0","id":11,"method":"ping"}`)
	if m := response("11"); m.Error != nil {
		t.Errorf("ping after the late answer: %+v", m.Error)
	}
	for len(p.LogWith("upstream stderr", mcptest.UpstreamLogged("tool=echo"))) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(p.LogWith("upstream stderr", mcptest.UpstreamLogged("tool=echo"))); n != 2 {
		t.Errorf("the upstream ran echo %d times; want 2 (the reused id's call and the last; the notification must not reach it)", n)
	}
	if n := len(p.LogWith("upstream stderr", mcptest.UpstreamLogged("tool=write_file"))); n != 0 {
		t.Errorf("the upstream ran write_file %d times", n)
	}
}

// Frames with a raw separator outside a string are refused (answered
// under their id, or id null where no id can be read) and never forwarded; a separator
// hidden in a member name or between tokens changes nothing the gate reads.
// Found by the red team of receipts and frames (issue 26 item 2) (was TestRTLineSeparatorOutsideStrings).
func TestE2ELineSeparatorOutsideStringsRefused(t *testing.T) {
	e := mcptest.NewEnv(t)
	pol := &mcptest.Policy{AllowUnauthenticated: true}
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Upstream: lineEchoUpstream(t, e, nil)})
	c := p.Raw()
	c.Initialize()
	for id, f := range map[string]string{
		"1": `{"jsonrpc":"2.0","id":1,"method":"tools/call",` + "\u2028" + `"params":{"name":"echo","arguments":{}}}`,
		"2": `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"a":1` + "\u0085" + `}}}`,
		"3": `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":"x"},"na` + "\u2028" + `me":"other"}}`,
	} {
		c.Send(f)
		m := c.Next()
		if id != "3" && string(m.ID) != id && string(m.ID) != "null" {
			t.Errorf("frame %s answered under id %s", id, m.ID)
		}
		if id == "3" {
			if m.Error == nil {
				if got := receivedLine(t, m); !strings.Contains(got, `"name":"echo"`) {
					t.Errorf("frame 3: upstream got %s", got)
				}
			}
			continue
		}
		if m.Error == nil {
			t.Errorf("frame %s with a separator outside a string was forwarded: %s", id, m.Result)
		}
	}
}
