//go:build unix

package extrastest

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/revocation"
)

// blockID is a revocation ID made of i.
func blockID(i int) string {
	d := sha256.Sum256([]byte(fmt.Sprint(i)))
	return base64.RawURLEncoding.EncodeToString(d[:])
}

// A server whose list holds many entries takes pushes by appending them:
// a tampered entry is refused and leaves the file as it was, ten pushes
// at once all land (each once, the file a valid list of every entry), a
// push of an entry it holds already changes nothing, and a pushed
// revocation is in force at once. (Before, each push re-read, re-verified
// and rewrote the whole list: seconds per push at 50,000 entries, and a
// peer's push timed out; BenchmarkPushToBigList in revdist measures it.)
func TestPushesToBigListAllLand(t *testing.T) {
	const n = 5_000
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	l := revocation.NewList()
	for i := range n {
		x, err := revocation.NewEntry(e.Root, blockID(i), revocation.ScopeBlock, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Add(x); err != nil {
			t.Fatal(err)
		}
	}
	data, err := l.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.Dir, "big.json")
	mcptest.WriteFile(t, path, string(data)+"\n")
	pol := e.Policy()
	pol.RevocationList = path
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol})
	sid := srv.Initialize(mcptest.Bearer(tok))
	post := func(x revocation.Entry) *mcptest.HTTPResponse {
		return srv.Do(http.MethodPost, revocationsPath, map[string]string{"Content-Type": "application/json"}, pushBody(t, x))
	}

	tampered, err := revocation.NewEntry(e.Root, blockID(n+1), revocation.ScopeBlock, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tampered.Scope = revocation.ScopeChain
	if r := post(tampered); r.Status != http.StatusBadRequest {
		t.Fatalf("a tampered entry: %d %s", r.Status, r.Body)
	}
	if b, _ := os.ReadFile(path); string(b) != string(data)+"\n" {
		t.Fatal("a refused push changed the list file")
	}

	var pushed []revocation.Entry
	for i := range 9 {
		x, err := revocation.NewEntry(e.Root, blockID(n+10+i), revocation.ScopeBlock, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		pushed = append(pushed, x)
	}
	revokes, err := revocation.NewEntry(e.Root, tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pushed = append(pushed, revokes)
	var wg sync.WaitGroup
	answers := make([]*mcptest.HTTPResponse, len(pushed))
	for i, x := range pushed {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = post(x) }()
	}
	wg.Wait()
	for i, r := range answers {
		if r.Status != http.StatusAccepted {
			t.Fatalf("push %d of ten at once: %d %s", i, r.Status, r.Body)
		}
	}
	// The push that revoked the token closed its session at once; a new
	// session with it is refused as revoked.
	if r := srv.Post(sid, mcptest.Bearer(tok), mcptest.CallBody("9", "echo", map[string]any{"text": "hi"})); r.Status != http.StatusNotFound && r.Status != http.StatusUnauthorized {
		t.Fatalf("after the pushes, a call in the revoked token's session: HTTP %d %s", r.Status, r.Body)
	}
	if r := srv.Do(http.MethodPost, "/mcp", mcptest.Bearer(tok), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`); r.Status != http.StatusUnauthorized || !strings.Contains(string(r.Body), "has been revoked") {
		t.Fatalf("after the pushes, a new session with the revoked token: HTTP %d %s", r.Status, r.Body)
	}
	again := strings.Replace(pushBody(t, pushed[3]), `{"jsonrpc"`, `{"id":1,"jsonrpc"`, 1)
	if r := srv.Do(http.MethodPost, revocationsPath, map[string]string{"Content-Type": "application/json"}, again); !strings.Contains(string(r.Body), `"added":false`) {
		t.Fatalf("an entry pushed again: %d %s", r.Status, r.Body)
	}
	got, err := revocation.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	entries := got.Entries()
	if len(entries) != n+len(pushed) {
		t.Fatalf("the list holds %d entries, want %d", len(entries), n+len(pushed))
	}
	if old := l.Entries(); fmt.Sprint(entries[:n]) != fmt.Sprint(old) {
		t.Fatal("the entries that were there are not first, in their order")
	}
	for _, x := range pushed {
		found := false
		for _, y := range entries[n:] {
			found = found || x == y
		}
		if !found {
			t.Fatalf("pushed entry %s is missing", x.RevocationID)
		}
	}
}
