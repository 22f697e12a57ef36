//go:build unix

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

// A record file planted beside the list (LIST.append, which every writer
// trusted as its own crash record; found by the rtnonce red team) made
// the operator's next `delegateos revoke` cut the list back to its first
// entry: the running server re-read it and took a token revoked before.
// Now the revoke is refused, naming the record, and the list is left.
func TestForgedAppendRecordUnrevokesNothing(t *testing.T) {
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
	sid, sid2 := srv.Initialize(mcptest.Bearer(tok)), srv.Initialize(mcptest.Bearer(tok))
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
	// The operator revokes something else: refused, naming the record.
	if out, errs, code := mcptest.CLI(t, "revoke", "--key", keyFile, "--token", later.String(), "--block", "0", "--list", list); code == 0 || !strings.Contains(errs, "list.json.append") {
		t.Fatalf("revoke beside a forged record: %d %s %s", code, out, errs)
	}
	if got := callOutcome(t, srv, sid2, tok); got != string(dct.Revoked) {
		l, _ := revocation.Load(list)
		t.Fatalf("after a forged %s.append and a revoke, the revoked token's call is %s; the list holds %d entries", filepath.Base(list), got, l.Len())
	}
}
