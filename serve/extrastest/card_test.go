//go:build unix

package extrastest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// The agent card names the server's did:key, its revocation endpoint and
// the token formats; /metrics counts the decisions of real calls; both
// are behind the endpoint's Host check.
func TestAgentCardAndMetrics(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	pol, _ := withList(t, e, "list.json")
	gateKey := mcptest.NewKey(t, "gate")
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", e.KeyFile(gateKey), "--require-signature"}})

	r := srv.Do(http.MethodGet, "/.well-known/agent-card.json", nil, "")
	card := r.JSON()
	ext, _ := card["delegateos"].(map[string]any)
	if r.Status != 200 || ext["did"] != gateKey.DID() || ext["revocationEndpoint"] != srv.Base+revocationsPath ||
		ext["mcpEndpoint"] != srv.URL || ext["acceptsRevocationPushes"] != true {
		t.Fatalf("card: %d %s", r.Status, r.Body)
	}
	if f, _ := ext["tokenFormats"].([]any); len(f) != 1 || f[0] != "delegateos-sjt-v1" {
		t.Fatalf("token formats %v", ext["tokenFormats"])
	}
	if s, _ := ext["requestSignatures"].([]any); len(s) != 1 || s[0] != "AVP-Sig v2" {
		t.Fatalf("request signatures %v", ext["requestSignatures"])
	}

	bearer := mcptest.Bearer(tok)
	signed := func(body string) map[string]string {
		return with(bearer, sign(t, e.Agent, "POST", "/mcp", body, time.Now()))
	}
	res := srv.Do("POST", "/mcp", signed(initBody), initBody)
	sid := res.Header.Get("Mcp-Session-Id")
	note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	srv.Post(sid, signed(note), note)
	for i, tool := range []string{"echo", "echo", "write_file"} {
		body := mcptest.CallBody(string(rune('1'+i)), tool, map[string]any{"text": "hi", "path": "/x", "content": "y"})
		srv.Post(sid, signed(body), body)
	}
	m := srv.Do(http.MethodGet, "/metrics", nil, "")
	text := string(m.Body)
	for _, want := range []string{
		`delegateos_decisions_total{method="tools/call",result="allowed"} 2`,
		`delegateos_decisions_total{method="tools/call",result="capability_not_granted"} 1`,
		`delegateos_upstream_duration_seconds_count{method="tools/call"} 2`,
		"delegateos_sessions 1",
		"delegateos_revocation_list_entries 0",
		"delegateos_upstream_restarts_total 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
	for _, path := range []string{"/metrics", "/.well-known/agent-card.json", revocationsPath} {
		if r := srv.Do(http.MethodGet, path, map[string]string{"Host": "evil.example"}, ""); r.Status != http.StatusForbidden {
			t.Errorf("%s with a foreign Host: %d", path, r.Status)
		}
	}
}
