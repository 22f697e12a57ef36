//go:build unix

package oauth_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// A client without a token is told where the resource metadata is, which
// names this server as its authorization server, whose metadata offers
// registration, PKCE S256 only and DPoP.
func TestMetadataAndChallenge(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	r := a.initialize(t, nil)
	want := `resource_metadata="` + a.srv.Base + `/.well-known/oauth-protected-resource/mcp"`
	if r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer ") || !strings.Contains(r.Header.Get("WWW-Authenticate"), want) {
		t.Fatalf("initialize without a token: HTTP %d, WWW-Authenticate %q: want 401 with %s", r.Status, r.Header.Get("WWW-Authenticate"), want)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		m := a.srv.Do(http.MethodGet, path, nil, "").JSON()
		if m["resource"] != a.srv.URL || mcptest.JSON(m["authorization_servers"]) != `["`+a.srv.Base+`"]` || !strings.Contains(mcptest.JSON(m["scopes_supported"]), "docs:read:/project/**") {
			t.Fatalf("%s: %v", path, m)
		}
	}
	// DNS rebinding: a Host the server does not answer for gets no
	// metadata made from it.
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server", "/authorize"} {
		if r := a.srv.Do(http.MethodGet, path, map[string]string{"Host": "evil.example"}, ""); r.Status != http.StatusForbidden {
			t.Errorf("%s with Host evil.example: HTTP %d, want 403", path, r.Status)
		}
	}
	m := a.srv.Do(http.MethodGet, "/.well-known/oauth-authorization-server", nil, "").JSON()
	if m["issuer"] != a.srv.Base || m["registration_endpoint"] != a.srv.Base+"/register" || mcptest.JSON(m["code_challenge_methods_supported"]) != `["S256"]` ||
		mcptest.JSON(m["grant_types_supported"]) != `["authorization_code","refresh_token","urn:ietf:params:oauth:grant-type:token-exchange"]` || mcptest.JSON(m["token_endpoint_auth_methods_supported"]) != `["none"]` {
		t.Fatalf("authorization server metadata: %v", m)
	}
}

// Without --authorize nothing changes: no metadata, a bare challenge.
func TestNoAuthorizeNoMetadata(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	if r := srv.Do(http.MethodGet, "/.well-known/oauth-protected-resource/mcp", nil, ""); r.Status != http.StatusNotFound {
		t.Fatalf("resource metadata without --authorize: HTTP %d", r.Status)
	}
}

// The authorization server refuses to start in the clear off loopback,
// and without each of its flags.
func TestAuthorizeFlagErrors(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	key := e.KeyFile(e.Agent)
	write := func(name, content string) string {
		p := filepath.Join(e.Dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shallow := write("shallow.tok", e.Mint(func(p *dct.CreateParams) { p.MaxChainDepth = 1 }, "mcp:echo:*").String())
	deep := write("deep.tok", e.Mint(func(p *dct.CreateParams) { p.MaxChainDepth = 3 }, "mcp:echo:*").String())
	pw := write("pw", password+"\n")
	short := write("short", "tooshort\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--authorize", "--listen", "0.0.0.0:0", "--grant", "@g", "--grant-key", "k", "--consent-password", "@p"}, "without TLS"},
		{[]string{"--authorize", "--listen", "127.0.0.1:0"}, "--authorize needs --grant"},
		{[]string{"--grant", "@g", "--listen", "127.0.0.1:0"}, "go with --authorize"},
		{[]string{"--authorize", "--listen", "127.0.0.1:0", "--grant", "@" + shallow, "--grant-key", key, "--consent-password", "@" + pw}, "needs 2"},
		{[]string{"--authorize", "--listen", "127.0.0.1:0", "--grant", "@" + deep, "--grant-key", key, "--consent-password", "@" + short}, "shorter than 12"},
		{[]string{"--authorize", "--listen", "127.0.0.1:0", "--grant", deep, "--grant-key", key, "--consent-password", "@" + pw}, "as @FILE"},
		{[]string{"--authorize", "--listen", "127.0.0.1:0", "--grant", "@" + deep, "--grant-key", key, "--consent-password", "@" + pw, "--oauth-client", "x=http://evil.example/cb"}, "loopback host only"},
	} {
		args := append(append([]string{"serve", "--root", e.Root.ID()}, c.args...), "--", "true")
		_, stderr, code := mcptest.CLI(t, args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %s: want %q", c.args, code, stderr, c.want)
		}
	}
}

// The whole flow by hand: register, consent, code for tokens; the token
// calls what its scope approved and is refused the rest.
func TestFlowBearer(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "hand client")
	tr := c.tokens("mcp:echo:* docs:read:/project/**", "")
	if tr["token_type"] != "Bearer" || tr["expires_in"].(float64) > 600 || tr["refresh_token"] == "" || tr["scope"] != "mcp:echo:* docs:read:/project/**" {
		t.Fatalf("token response %v", tr)
	}
	tok := tr["access_token"].(string)
	sid := a.srv.Initialize(bearer(tok))
	r := a.srv.Post(sid, bearer(tok), mcptest.CallBody("1", "echo", map[string]any{"text": "hi"}))
	if !strings.Contains(string(r.Body), `"hi"`) {
		t.Fatalf("echo: %d %s", r.Status, r.Body)
	}
	r = a.srv.Post(sid, bearer(tok), mcptest.CallBody("2", "write_file", map[string]any{"path": "/project/x.md", "content": "no"}))
	if !strings.Contains(string(r.Body), "capability_not_granted") {
		t.Fatalf("write_file outside the approved scope: %d %s", r.Status, r.Body)
	}
}
