//go:build unix && redteam

package extrastest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/revocation"
)

// Red team (rtnonce): one list file with two names (a hard link; a single
// file bind-mounted into a second server's container pins the inode the
// same way), starting empty. A revocation pushed to the server reading one
// name must be in force at the server reading the other. File.Append
// writes the first entry of an empty list by rename, so the other name
// keeps "[]" and that server takes the revoked token for ever. (Before,
// the push went through revocation.Append, which rewrites a list with
// several names in place.)
func TestRedteamPushToEmptyHardLinkedList(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	path := filepath.Join(e.Dir, "list.json")
	mcptest.WriteFile(t, path, "[]\n")
	other := filepath.Join(e.Dir, "mounted.json")
	if err := os.Link(path, other); err != nil {
		t.Fatal(err)
	}
	polA, polB := e.Policy(), e.Policy()
	polA.RevocationList, polB.RevocationList = path, other
	a := e.StartServe(mcptest.ServeOptions{Policy: polA})
	b := e.StartServe(mcptest.ServeOptions{Policy: polB})
	sidB := b.Initialize(mcptest.Bearer(tok))
	revokes, err := revocation.NewEntry(e.Root, tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r := a.Do(http.MethodPost, revocationsPath, map[string]string{"Content-Type": "application/json"}, pushBody(t, revokes)); r.Status != http.StatusAccepted {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	if got := callOutcome(t, b, sidB, tok); got != string(dct.Revoked) {
		data, _ := os.ReadFile(other)
		t.Fatalf("the server reading the list's other name takes the revoked token (%s); it reads %q", got, data)
	}
}

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
