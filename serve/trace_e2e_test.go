package serve_test

import (
	"encoding/hex"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// serve traces each session's gated requests as the stdio proxy does: the
// span joins the client's trace from params._meta, says what the gate
// decided, and is exported over OTLP by the time serve has exited.
func TestServeTracing(t *testing.T) {
	t.Parallel()
	recv, endpoint := mcptest.StartOTLP(t, "http/protobuf")
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: tok,
		Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_TRACES_EXPORTER=otlp"}})
	sid := srv.Initialize(nil)
	const trace, parent = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7"
	res := srv.Post(sid, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"00-`+trace+`-`+parent+`-01"},"name":"echo","arguments":{"text":"over http"}}}`)
	if res.Status != 200 || !strings.Contains(string(res.Body), "over http") {
		t.Fatalf("echo: HTTP %d %s", res.Status, res.Body)
	}
	srv.Signal(syscall.SIGTERM)
	if !srv.WaitExit(20 * time.Second) {
		t.Fatal("serve did not exit")
	}
	var call, up bool
	for _, s := range recv.Spans() {
		if hex.EncodeToString(s.TraceId) != trace {
			continue
		}
		switch s.Name {
		case "tools/call echo":
			call = hex.EncodeToString(s.ParentSpanId) == parent && mcptest.AttrString(s, "delegateos.decision") == "allow"
		case "upstream tools/call":
			up = true
		}
	}
	if !call || !up {
		t.Errorf("spans in the client's trace: call %v, upstream %v; got %d spans", call, up, len(recv.Spans()))
	}
}
