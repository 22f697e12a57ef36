//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// prompts/get is decided by the prompt's name alone: its arguments are
// forwarded unmapped, and a prompt rule cannot take its resource from one
// (only a rule built in code can, and MapPrompt then refuses it). The
// docserver's summarize prompt reads the document named by its path
// argument, so a token that may read /project/sub/** and get summarize
// reads /project/secret.md through the prompt, which read_file and
// resources/read refuse it.
func TestRedteam2PromptArgumentReadsOutsideTheGrant(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "docs:read:/project/sub/**", "mcp-resource:read:file:///project/sub/**", "mcp-prompt:get:summarize")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok})
	c := p.Raw()
	c.Initialize()
	// The grant holds for the tool and the resource.
	c.Send(mcptest.CallFrame("1", "read_file", map[string]any{"path": "/project/secret.md"}))
	if m := c.Response("1"); m.Error == nil {
		t.Fatalf("read_file /project/secret.md was allowed: %s", m.Result)
	}
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///project/secret.md"}}`)
	if m := c.Response("2"); m.Error == nil {
		t.Fatalf("resources/read file:///project/secret.md was allowed: %s", m.Result)
	}
	// The same document through the prompt.
	c.Send(`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"summarize","arguments":{"path":"/project/secret.md"}}}`)
	m := c.Response("3")
	if m.Error == nil && strings.Contains(string(m.Result), "STAGING_DB_PASSWORD") {
		t.Errorf("prompts/get summarize returned /project/secret.md, which the token may not read: %.200s", m.Result)
	}
}

// The proxy reads its revocation list through one name; the operator
// revokes through another name of the same file (a hard link here; a file
// bind-mounted into the proxy's container pins the inode the same way).
// delegateos revoke replaces the name it was given with a new file and
// returns success, and the proxy's name still holds the old list: the
// revoked token keeps authorizing calls, indefinitely.
func TestRedteam2RevokeThroughAnotherNameOfTheList(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	list := filepath.Join(e.Dir, "revocations.json")
	mcptest.WriteFile(t, list, "[]\n")
	mounted := filepath.Join(t.TempDir(), "revocations.json")
	if err := os.Link(list, mounted); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	tok := e.Mint(nil, "mcp:echo:*")
	pol := e.Policy()
	pol.RevocationList = list
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol})
	s := p.Connect(mcptest.SessionOptions{})
	s.CallAs(t, tok.String(), "echo", map[string]any{"text": "before"}).OK(t, "echo before the revocation")
	tokFile := filepath.Join(e.Dir, "agent.tok")
	mcptest.WriteFile(t, tokFile, tok.String())
	if out, errOut, code := mcptest.CLI(t, "revoke", "--key", e.KeyFile(e.Root), "--token", "@"+tokFile, "--block", "0", "--list", mounted); code != 0 {
		t.Fatalf("delegateos revoke: exit %d\n%s%s", code, out, errOut)
	}
	if r := s.CallAs(t, tok.String(), "echo", map[string]any{"text": "after"}); r.Err == nil {
		t.Errorf("echo after 'delegateos revoke --list %s' returned was allowed; the proxy's name %s still holds the old list", mounted, list)
	}
}
