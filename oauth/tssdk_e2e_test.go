//go:build unix

package oauth_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// jsSDKVersion is the @modelcontextprotocol/sdk version interop/oauth-js
// pins.
const jsSDKVersion = "1.32.2"

// jsClient installs interop/oauth-js's pinned packages once and returns
// its directory; without Node.js 20+ and npm the test fails.
func jsClient(t *testing.T) string {
	t.Helper()
	return mcptest.NodePackages(t, "interop/oauth-js", "@modelcontextprotocol/sdk", jsSDKVersion)
}

// chromium is Debian's headless browser (scripts/install-chromium.sh
// installs it); the test fails without it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("the consent page test needs Chromium: run scripts/install-chromium.sh (Debian's chromium package)")
	return ""
}

type tsReport struct {
	Page struct {
		Client       string   `json:"client"`
		Capabilities []string `json:"capabilities"`
		Budget       string   `json:"budget"`
	} `json:"page"`
	Calls           map[string]json.RawMessage `json:"calls"`
	FirstCallMillis float64                    `json:"firstCallMillis"`
	TokenType       string                     `json:"tokenType"`
	Scope           string                     `json:"scope"`
	Error           string                     `json:"error"`
	ClientID        string                     `json:"clientId"`
}

// runTS runs oauth.mjs against a's server with env added, unticking
// untick on the consent page, and reads its report.
func runTS(t *testing.T, a *asEnv, untick string, env ...string) tsReport {
	t.Helper()
	dir, browser := jsClient(t), chromium(t)
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command("node", "oauth.mjs", a.srv.URL, browser, filepath.Join(a.e.Dir, "consent.pw"), untick, out)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node oauth.mjs: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r tsReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report %s: %v", b, err)
	}
	if r.Error != "" {
		t.Fatal(r.Error)
	}
	return r
}

// The TypeScript SDK's own OAuth client (an OAuthClientProvider given to
// its Streamable HTTP transport) goes from a 401 through discovery,
// registration, the consent page approved in headless Chromium (one
// capability unticked there) and the token endpoint, to a tool call its
// approval allows, and is refused the unticked one.
func TestTypeScriptSDKOAuthWithChromiumConsent(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	r := runTS(t, a, "docs:write:/project/**")
	if len(a.srv.LogWith("oauth client registered", nil)) != 1 {
		t.Errorf("the client did not register itself")
	}
	if r.Page.Client != "TypeScript SDK e2e" || strings.Join(r.Page.Capabilities, " ") != strings.Join(grantCaps, " ") || r.Page.Budget != "1000000" {
		t.Errorf("the consent page showed %+v", r.Page)
	}
	if !strings.Contains(string(r.Calls["echo"]), "via oauth") {
		t.Errorf("echo, within the approval: %s", r.Calls["echo"])
	}
	if w := string(r.Calls["write_file"]); !strings.Contains(w, "capability_not_granted") && !strings.Contains(w, "-32001") {
		t.Errorf("write_file, unticked on the consent page: %s", w)
	}
	if r.TokenType != "Bearer" || strings.Contains(r.Scope, "docs:write") {
		t.Errorf("token type %q, scope %q", r.TokenType, r.Scope)
	}
	t.Logf("from the first 401 to the first allowed call: %.0f ms (discovery, registration, consent in Chromium, token)", r.FirstCallMillis)
}

// A client configured with a client ID registered beforehand (serve
// --oauth-client) skips registration and goes through the same consent.
func TestTypeScriptSDKPreRegisteredClient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", port)
	a := startAS(t, nil, "--oauth-client", "my-connector="+redirect)
	r := runTS(t, a, "", "CLIENT_ID=my-connector", fmt.Sprint("CALLBACK_PORT=", port))
	if n := len(a.srv.LogWith("oauth client registered", nil)); n != 0 || r.ClientID != "my-connector" || r.Page.Client != "my-connector" {
		t.Errorf("%d registrations, client %q, page %+v: want the pre-registered client, unregistered", n, r.ClientID, r.Page)
	}
	if !strings.Contains(string(r.Calls["echo"]), "via oauth") {
		t.Errorf("echo: %s", r.Calls["echo"])
	}
}
