package serve_test

import (
	"fmt"
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
