package serve_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// An HTTP MCP server behind --upstream-url is gated like a stdio one: a
// granted call and its progress go through, a refused call never reaches
// it, and every session gets its own upstream session.
func TestServeUpstreamURL(t *testing.T) {
	var calls atomic.Int64
	up := server.NewMCPServer("http-upstream", "1", server.WithToolCapabilities(true))
	up.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		if tok := req.Params.Meta; tok != nil && tok.ProgressToken != nil {
			_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress",
				map[string]any{"progressToken": tok.ProgressToken, "progress": 1, "total": 1})
		}
		return mcp.NewToolResultText("http says " + req.GetString("text", "")), nil
	})
	up.AddTool(mcp.NewTool("drop_tables"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		return mcp.NewToolResultText("dropped"), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(up))
	t.Cleanup(hs.Close)

	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), UpstreamURL: hs.URL + "/mcp"})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	for range 2 {
		sid := srv.Initialize(tok)
		st := srv.PostStream(sid, tok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"u1"}}}`)
		var got []string
		for m := st.Next(); m != nil; m = st.Next() {
			if m["method"] != nil {
				got = append(got, m["method"].(string))
			} else if strings.Contains(mcptest.JSON(m), "http says hi") {
				got = append(got, "result")
			}
		}
		if strings.Join(got, ",") != "notifications/progress,result" && strings.Join(got, ",") != "result" {
			t.Fatalf("echo through --upstream-url: %v", got)
		}
		r := srv.Post(sid, tok, mcptest.CallBody("2", "drop_tables", nil))
		if ms := r.Messages(); len(ms) != 1 || !strings.Contains(mcptest.JSON(ms[0]["error"]), "DCT verification failed") {
			t.Fatalf("drop_tables: %s", r.Body)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the upstream ran %d calls, want the 2 granted echo calls", n)
	}
	mcptest.Eventually(t, "one upstream bridge per session", func() bool {
		return len(srv.LogWith("upstream started", nil)) == 2
	})
}
