package agentcard

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/delegateos/delegateos/identity"
)

func TestCard(t *testing.T) {
	k, err := identity.FromSeed(bytes.Repeat([]byte{1}, 32), "gate")
	if err != nil {
		t.Fatal(err)
	}
	c := &Card{Name: "docs gate", Key: k, MCPPath: "/mcp", RevocationPath: "/.well-known/delegateos/revocations",
		AcceptsRevocationPushes: true, RequireSignature: true}
	h, err := c.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"name", "description", "version", "supportedInterfaces", "capabilities", "defaultInputModes", "defaultOutputModes", "skills"} {
		if _, ok := doc[m]; !ok {
			t.Errorf("no A2A member %q", m)
		}
	}
	ext, _ := doc["delegateos"].(map[string]any)
	want := map[string]any{
		"did":                     k.DID(),
		"principal":               k.ID(),
		"revocationEndpoint":      srv.URL + "/.well-known/delegateos/revocations",
		"acceptsRevocationPushes": true,
		"mcpEndpoint":             srv.URL + "/mcp",
		"tokenFormats":            []any{"delegateos-sjt-v1"},
		"requestSignatures":       []any{"AVP-Sig v2"},
		"version":                 "0.2",
	}
	for k, v := range want {
		got, _ := json.Marshal(ext[k])
		exp, _ := json.Marshal(v)
		if !bytes.Equal(got, exp) {
			t.Errorf("delegateos.%s = %s, want %s", k, got, exp)
		}
	}

	// A configured public URL wins over the request's Host.
	c.PublicURL = "https://gate.example.com"
	h, _ = c.Handler()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", Path, nil)
	req.Host = "evil.example"
	h.ServeHTTP(rec, req)
	var d Document
	json.Unmarshal(rec.Body.Bytes(), &d)
	if d.DelegateOS.RevocationEndpoint != "https://gate.example.com/.well-known/delegateos/revocations" {
		t.Fatalf("revocation endpoint %q", d.DelegateOS.RevocationEndpoint)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", Path, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", rec.Code)
	}
	for _, bad := range []string{"gate.example.com", "ftp://x", "https://x/?q=1"} {
		c.PublicURL = bad
		if _, err := c.Handler(); err == nil {
			t.Errorf("public URL %q accepted", bad)
		}
	}
}
