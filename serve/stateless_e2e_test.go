package serve_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A stateless (MCP 2026-07-28) request gets its progress from a stdio
// upstream that, as the SDKs of earlier revisions do, sends nothing of its
// own before notifications/initialized: the shared relay initializes its
// upstream as a session's client would.
func TestServeStatelessProgressFromStrictUpstream(t *testing.T) {
	e := mcptest.NewEnv(t)
	up := mcptest.Build(t, "./internal/cmd/strictupstream", false)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:slow:*"), Upstream: []string{up}})
	for _, id := range []string{`"s1"`, `"s2"`} {
		st := srv.PostStream("", stateless, statelessSlow(id, 1, 0, `"tok"`))
		var got []string
		for m := st.Next(); m != nil; m = st.Next() {
			if m["method"] != nil {
				got = append(got, m["method"].(string))
			} else if m["result"] != nil {
				got = append(got, "result")
			} else {
				got = append(got, mcptest.JSON(m))
			}
		}
		if len(got) != 2 || got[0] != "notifications/progress" || got[1] != "result" {
			t.Fatalf("stateless call %s: %v, want its progress then its result", id, got)
		}
	}
	srv.WaitLog("upstream started", nil)
	if n := len(srv.LogWith("upstream started", nil)); n != 1 {
		t.Fatalf("%d upstreams for the stateless requests of one credential, want 1", n)
	}
}

// statelessEcho is a stateless (MCP 2026-07-28) tools/call of echo.
func statelessEcho(id int, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`, id, text)
}

// A stateless client has no session to start again: when the relay its
// credential shares is reaped, the next stateless request gets a new one
// at once, not a 404 telling it to initialize while the old relay's
// upstream is still shutting down.
func TestServeStatelessRequestDuringReapGetsANewRelay(t *testing.T) {
	e := mcptest.NewEnv(t)
	// An upstream that takes its time to exit once its input closes.
	up := []string{"sh", "-c", `"$0" --root "$1" --diagnostics; exec sleep 600`, mcptest.Docserver(t), e.Docs}
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Upstream: up, Flags: []string{"--idle-timeout", "1s"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Authorization": tok["Authorization"]}
	if r := srv.Do("POST", "/mcp", h, statelessEcho(1, "first")); r.Status != 200 || !strings.Contains(string(r.Body), "first") {
		t.Fatalf("a stateless call: HTTP %d %s", r.Status, r.Body)
	}
	srv.WaitLog("closing the session", nil)
	if r := srv.Do("POST", "/mcp", h, statelessEcho(2, "second")); r.Status != 200 || !strings.Contains(string(r.Body), "second") {
		t.Fatalf("a stateless call while its reaped relay shuts down: HTTP %d %s", r.Status, r.Body)
	}
}

// Stateless requests of clients that present the same credential (here
// none: every anonymous client runs on the --token default) share one
// relay, but they are different clients: one must not see another's
// progress or server messages, nor cancel its calls.
func TestServeStatelessClientsShareNoStreams(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:slow:*")})

	t.Run("progress token squatted", func(t *testing.T) {
		mallory := srv.PostStream("", stateless, statelessSlow(`"m1"`, 20, 50, `"p"`))
		if m := mallory.Next(); m["method"] != "notifications/progress" {
			t.Fatalf("mallory's first message %v", m)
		}
		alice := srv.PostStream("", stateless, statelessSlow(`"a1"`, 3, 10, `"p"`))
		if alice.Status == 200 {
			for m := alice.Next(); m != nil; m = alice.Next() {
			}
		}
		for m := mallory.Next(); m != nil; m = mallory.Next() {
			if p, _ := m["params"].(map[string]any); p != nil && p["total"] == float64(3) {
				t.Fatalf("mallory's stream carries alice's progress: %v", m)
			}
		}
	})

	t.Run("a message for no open request", func(t *testing.T) {
		// Alice's progress token is spelled so that the upstream's
		// notifications name it otherwise: they match no request.
		alice := srv.PostStream("", stateless, statelessSlow(`"a2"`, 6, 100, `1.0`))
		mallory := srv.PostStream("", stateless, statelessSlow(`"m2"`, 10, 100, ""))
		for m := mallory.Next(); m != nil; m = mallory.Next() {
			if m["method"] == "notifications/progress" {
				t.Fatalf("mallory's stream carries another client's progress: %v", m)
			}
		}
		for m := alice.Next(); m != nil; m = alice.Next() {
		}
	})

	t.Run("cancelling another's call", func(t *testing.T) {
		alice := srv.PostStream("", stateless, statelessSlow(`"a3"`, 5, 100, `"pa3"`))
		if m := alice.Next(); m["method"] != "notifications/progress" {
			t.Fatalf("alice's first message %v", m)
		}
		r := srv.Do(http.MethodPost, "/mcp", stateless, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a3"}}`)
		if r.Status == http.StatusAccepted {
			t.Errorf("a stateless notifications/cancelled was taken: HTTP %d", r.Status)
		}
		var last map[string]any
		for m := alice.Next(); m != nil; m = alice.Next() {
			last = m
		}
		if !strings.Contains(mcptest.JSON(last["result"]), "done 5") {
			t.Fatalf("alice's call was disturbed: %v", last)
		}
	})
}
