//go:build unix

package oauth_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// inspectorVersion is the @modelcontextprotocol/inspector version
// interop/inspector-js pins.
const inspectorVersion = "2.12.0"

// inspector installs interop/inspector-js's pinned packages once and
// returns its directory. (The same pin as interop/inspector-cli, which the
// proxy package's tests install: a directory each, since test packages run
// at once and two npm installs in one directory would race.)
func inspector(t *testing.T) string {
	t.Helper()
	return mcptest.NodePackages(t, "interop/inspector-js", "@modelcontextprotocol/inspector", inspectorVersion)
}

// The MCP Inspector's CLI, given a client ID registered beforehand
// (serve --oauth-client), authorizes and calls a tool: it opens the
// authorization URL with the system's opener (xdg-open, whose $BROWSER is
// here headless Chromium approving the consent page), takes the code on
// its loopback callback, and makes the call with the token.
func TestInspectorCLIPreRegisteredClient(t *testing.T) {
	t.Parallel()
	dir, browser := inspector(t), chromium(t)
	jsDir := jsClient(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	callback := fmt.Sprintf("http://127.0.0.1:%d/oauth/callback", port)
	a := startAS(t, nil, "--oauth-client", "inspector="+callback)

	tmp := t.TempDir()
	report := filepath.Join(tmp, "browser.json")
	opener := filepath.Join(tmp, "browser.sh")
	mcptest.WriteFile(t, opener, fmt.Sprintf("#!/bin/sh\nexec node %q %q %q %q \"$1\"\n",
		filepath.Join(jsDir, "approve.mjs"), browser, filepath.Join(a.e.Dir, "consent.pw"), report))
	if err := os.Chmod(opener, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js"),
		"--cli", "--server-url", a.srv.URL, "--transport", "http", "--client-id", "inspector", "--callback-url", callback,
		"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=from the inspector")
	cmd.Dir = tmp
	env := []string{"MCP_AUTO_OPEN_ENABLED=true", "BROWSER=" + opener, "HOME=" + tmp, "XDG_CONFIG_HOME=" + filepath.Join(tmp, "config")}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "DISPLAY" && k != "WAYLAND_DISPLAY" && k != "BROWSER" && k != "HOME" && k != "XDG_CONFIG_HOME" {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "from the inspector") {
		b, _ := os.ReadFile(report)
		t.Fatalf("the Inspector CLI: %v\n%s\nbrowser: %s", err, out, b)
	}
	// The browser runs detached from the Inspector: wait until it is gone.
	mcptest.Eventually(t, "the browser's end", func() bool { _, err := os.Stat(report + ".done"); return err == nil })
	if n := len(a.srv.LogWith("oauth client registered", nil)); n != 0 {
		t.Errorf("the Inspector registered a client (%d): want it to use its client ID", n)
	}
	b, err := os.ReadFile(report)
	if err != nil || !strings.Contains(string(b), `"client":"inspector"`) {
		t.Errorf("the consent page the browser saw: %s %v", b, err)
	}
}
