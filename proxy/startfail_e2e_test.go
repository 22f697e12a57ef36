package proxy_test

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A client of MCP 2026-07-28 (mcp-go's) asks server/discover before it
// initializes, and falls back to initialize when discovery fails: a proxy
// that cannot start answered the discovery only and exited, so the client
// saw "transport closed". It now answers every request until the
// initialize, so the reason is what initialize returns.
func TestStartFailureShownToAModernClient(t *testing.T) {
	e := mcptest.NewEnv(t)
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:echo:*"),
		Flags:    []string{"--spend-store", e.Dir + "/no/such/dir/spend.json"},
		WantExit: func(code int) bool { return code == 2 }})
	c := client.NewClient(transport.NewIO(p.Stdout, p.Stdin, nil), client.WithDiscoverTimeout(-1))
	ctx := mcptest.Context(t)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "mcptest", Version: "0"}}})
	want := "delegateos proxy cannot start: the spend store " + e.Dir + "/no/such/dir/spend.json cannot be opened"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("initialize: %v; want the reason, %q", err, want)
	}
	if !p.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("the proxy that cannot start is still running after answering its client")
	}
}
