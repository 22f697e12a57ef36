//go:build unix

package extrastest

import (
	"net/http"
	"os"
	"path/filepath"
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
func TestPushToEmptyHardLinkedList(t *testing.T) {
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
