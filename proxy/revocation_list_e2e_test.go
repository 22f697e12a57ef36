//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// The proxy reads its revocation list through one name; the operator
// revokes through another name of the same file (a hard link here; a file
// bind-mounted into the proxy's container pins the inode the same way).
// delegateos revoke replaces the name it was given with a new file and
// returns success, and the proxy's name still holds the old list: the
// revoked token keeps authorizing calls, indefinitely.
// Found by the second red team (was TestRedteam2RevokeThroughAnotherNameOfTheList).
func TestE2ERevocationThroughAnotherNameOfTheList(t *testing.T) {
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
