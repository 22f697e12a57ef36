package serve_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

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
