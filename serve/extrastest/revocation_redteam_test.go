//go:build unix && redteam

package extrastest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/revocation"
)

// Red team (rtnonce): a record file planted beside the list (LIST.append,
// which any writer trusts as its own crash record) makes the operator's
// next `delegateos revoke` cut the list back to its first entry: the
// running server re-reads it and takes a token revoked before.
func TestRedteamForgedAppendRecordUnrevokes(t *testing.T) {
	e := mcptest.NewEnv(t)
	first, tok, later := e.Mint(nil, "mcp:echo:*"), e.Mint(nil, "mcp:echo:*"), e.Mint(nil, "mcp:echo:*")
	pol, list := withList(t, e, "list.json")
	keyFile := e.KeyFile(e.Root)
	revoke := func(x *dct.Token) {
		if out, errs, code := mcptest.CLI(t, "revoke", "--key", keyFile, "--token", x.String(), "--block", "0", "--list", list); code != 0 {
			t.Fatalf("revoke: %d %s %s", code, out, errs)
		}
	}
	revoke(first)
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol})
	sid := srv.Initialize(mcptest.Bearer(tok))
	revoke(tok)
	if got := callOutcome(t, srv, sid, tok); got != string(dct.Revoked) {
		t.Fatalf("before: %s", got)
	}
	data, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	head := strings.Index(string(data), "},\n")
	old := "}\n]\n"
	mcptest.WriteFile(t, list+".append", fmt.Sprintf("delegateos-revocation-append %d %d %x\n", head, head+len(old), old))
	revoke(later) // the operator revokes something else
	if got := callOutcome(t, srv, sid, tok); got != string(dct.Revoked) {
		l, _ := revocation.Load(list)
		t.Fatalf("after a forged %s.append and a revoke, the revoked token's call is %s; the list holds %d entries", filepath.Base(list), got, l.Len())
	}
}
