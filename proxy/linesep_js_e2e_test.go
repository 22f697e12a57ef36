//go:build unix

package proxy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// The MCP TypeScript SDK's client writes U+2028 and U+2029 raw inside
// strings (JSON.stringify does). The proxy refused such a frame, rightly
// (a line reader upstream may split there), but answered it under no id:
// the client waited for its call until its own timeout. Now the frame is
// forwarded with the separator escaped, which every JSON reader decodes
// to the same string: the real SDK client gets its tool's answer, and the
// receipt's arguments are what was forwarded.
func TestLineSeparatorTypeScriptSDK(t *testing.T) {
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := e.Policy()
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\nreceipts: {include_arguments: true}\n"
	tok := e.Mint(nil, "mcp:echo:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
	text := "line\u2028separated\u2029paragraph"
	rep := runJSApprover(t, p, "none", "echo", map[string]any{"text": text})
	if rep.Error != nil || rep.Result == nil || rep.Result.IsError || len(rep.Result.Content) == 0 || rep.Result.Content[0].Text != text {
		t.Fatalf("the TypeScript SDK's call with U+2028 in its arguments got %+v; want the echo of %q", rep, text)
	}
	ds, _ := receiptsOf(t, p, logPath)
	if len(ds) != 1 || ds[0].ArgumentsJSON != `{"text":"line\u2028separated\u2029paragraph"}` {
		t.Fatalf("decision receipts %+v; want one whose arguments_json is the arguments as forwarded, separators escaped", ds)
	}
	if ds[0].ArgumentsHash != "sha256:"+hexSHA([]byte(ds[0].ArgumentsJSON)) {
		t.Errorf("arguments_hash %s is not the SHA-256 of the arguments forwarded", ds[0].ArgumentsHash)
	}
	if strings.Contains(p.Log(), "client frame refused") {
		t.Error("the proxy logged a refused frame")
	}
}

// The same through delegateos serve: the SDK's Streamable HTTP client
// posts the separator raw, and serve refused the body (400) as the relay
// did. Now it is forwarded escaped and answered.
func TestLineSeparatorTypeScriptSDKServe(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	tok := e.Mint(nil, "mcp:echo:*")
	text := "line\u2028separated\u2029paragraph"
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command("node", "httpcall.mjs", srv.URL, tok.String(), out, "echo", mcptest.MustJSON(map[string]any{"text": text}))
	cmd.Dir = jsApprover(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node httpcall.mjs: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep jsReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report %s: %v", b, err)
	}
	if rep.Error != nil || rep.Result == nil || rep.Result.IsError || len(rep.Result.Content) == 0 || rep.Result.Content[0].Text != text {
		t.Fatalf("the TypeScript SDK's call through serve with U+2028 in its arguments got %s; want the echo of %q", b, text)
	}
}
