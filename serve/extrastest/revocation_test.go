//go:build unix

package extrastest

import (
	"encoding/json"
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

const revocationsPath = "/.well-known/delegateos/revocations"

// withList is e's policy with a new, empty revocation list file.
func withList(t *testing.T, e *mcptest.Env, name string) (*mcptest.Policy, string) {
	t.Helper()
	path := filepath.Join(e.Dir, name)
	mcptest.WriteFile(t, path, "[]\n")
	p := e.Policy()
	p.RevocationList = path
	return p, path
}

// callOutcome is "allowed" or the denial type of an echo call under tok.
func callOutcome(t *testing.T, srv *mcptest.Server, sid string, tok *dct.Token) string {
	t.Helper()
	r := srv.Post(sid, mcptest.Bearer(tok), mcptest.CallBody("9", "echo", map[string]any{"text": "hi"}))
	if r.Status == http.StatusUnauthorized && strings.Contains(string(r.Body), "has been revoked") {
		// The server closed the session: its token was revoked.
		return string(dct.Revoked)
	}
	for _, m := range r.Messages() {
		if _, ok := m["result"]; ok {
			return "allowed"
		}
		if e, ok := m["error"].(map[string]any); ok {
			if d, ok := e["data"].(map[string]any); ok {
				typ, _ := d["type"].(string)
				return typ
			}
			return "error"
		}
	}
	t.Fatalf("no answer: %d %s", r.Status, r.Body)
	return ""
}

func pushBody(t *testing.T, e revocation.Entry) string {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "delegateos/revoke", "params": map[string]any{"revocation": e}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A revocation made with delegateos revoke on one server reaches a peer
// that polls it within the poll interval.
func TestRevocationReachesPollingPeer(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	polA, listA := withList(t, e, "a.json")
	polB, _ := withList(t, e, "b.json")
	a := e.StartServe(mcptest.ServeOptions{Policy: polA})
	b := e.StartServe(mcptest.ServeOptions{Policy: polB, Flags: []string{"--revocation-peer", a.Base, "--revocation-poll", "300ms"}})
	sid := b.Initialize(mcptest.Bearer(tok))
	if got := callOutcome(t, b, sid, tok); got != "allowed" {
		t.Fatalf("before the revocation: %s", got)
	}
	if out, errs, code := mcptest.CLI(t, "revoke", "--key", e.KeyFile(e.Root), "--token", tok.String(), "--block", "0", "--list", listA); code != 0 {
		t.Fatalf("revoke: %d %s %s", code, out, errs)
	}
	// Only b's polls can bring it: a has no peers to push to. A poll that
	// adds an entry ends the sessions of the tokens it revokes at once, so
	// the session is either refused the call or already gone.
	mcptest.Eventually(t, "the peer to refuse the revoked token or close its session", func() bool {
		if r := b.Post(sid, mcptest.Bearer(tok), mcptest.CallBody("9", "echo", map[string]any{"text": "hi"})); r.Status == http.StatusNotFound {
			return true
		}
		return callOutcome(t, b, sid, tok) == string(dct.Revoked)
	})
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if r := b.Do(http.MethodPost, "/mcp", mcptest.Bearer(tok), init); r.Status != http.StatusUnauthorized || !strings.Contains(string(r.Body), "has been revoked") {
		t.Fatalf("a new session with the revoked token at the peer: HTTP %d %s", r.Status, r.Body)
	}
	if l, err := revocation.Load(filepath.Join(e.Dir, "b.json")); err != nil || l.Len() != 1 {
		t.Fatalf("b's list file: %v, %v", l, err)
	}
}

// A revocation pushed to one server is pushed at once to its peer, which
// does not poll within the test; forged, unauthorized, oversized and
// malformed pushes are refused and leave both lists empty.
func TestRevocationPushedToPeer(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	polB, listB := withList(t, e, "b.json")
	b := e.StartServe(mcptest.ServeOptions{Policy: polB})
	polA, listA := withList(t, e, "a.json")
	a := e.StartServe(mcptest.ServeOptions{Policy: polA, Flags: []string{"--revocation-peer", b.Base + revocationsPath, "--revocation-poll", "1h"}})
	sid := b.Initialize(mcptest.Bearer(tok))
	if got := callOutcome(t, b, sid, tok); got != "allowed" {
		t.Fatalf("before the revocation: %s", got)
	}

	good, err := revocation.NewEntry(e.Root, tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	forged := good
	forged.RevokedAt = "2020-01-01T00:00:00.000Z"
	unsigned := good
	unsigned.Signature = ""
	stranger, _ := revocation.NewEntry(e.Agent, tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	post := func(body string) *mcptest.HTTPResponse {
		return a.Do(http.MethodPost, revocationsPath, map[string]string{"Content-Type": "application/json"}, body)
	}
	for _, c := range []struct {
		name, body string
		status     int
	}{
		{"forged", pushBody(t, forged), 400},
		{"unsigned", pushBody(t, unsigned), 400},
		{"not the revoker's to revoke", pushBody(t, stranger), 403},
		{"oversized", strings.Replace(pushBody(t, good), `"scope"`, `"pad":"`+strings.Repeat("x", 20000)+`","scope"`, 1), 413},
		{"unknown member", strings.Replace(pushBody(t, good), `"scope"`, `"extra":1,"scope"`, 1), 400},
	} {
		if r := post(c.body); r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Body, c.status)
		}
	}
	for _, l := range []string{listA, listB} {
		if b, _ := os.ReadFile(l); strings.TrimSpace(string(b)) != "[]" {
			t.Fatalf("a refused push changed %s: %s", l, b)
		}
	}
	if got := callOutcome(t, b, sid, tok); got != "allowed" {
		t.Fatalf("after refused pushes: %s", got)
	}

	if r := post(pushBody(t, good)); r.Status != http.StatusAccepted {
		t.Fatalf("good push: %d %s", r.Status, r.Body)
	}
	mcptest.Eventually(t, "the push to reach the peer", func() bool {
		r := b.Do(http.MethodPost, "/mcp", mcptest.Bearer(tok), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
		return r.Status == http.StatusUnauthorized && strings.Contains(string(r.Body), "has been revoked")
	})
	// The push closed the revoked token's session on the peer.
	if r := b.Post(sid, mcptest.Bearer(tok), mcptest.CallBody("10", "echo", map[string]any{"text": "hi"})); r.Status != http.StatusNotFound && r.Status != http.StatusUnauthorized {
		t.Fatalf("a call in the revoked token's session: HTTP %d %s", r.Status, r.Body)
	}
	l, err := revocation.Load(listB)
	if err != nil || l.Len() != 1 || l.Entries()[0] != good {
		t.Fatalf("b's list: %v, %v", l, err)
	}

	// Both publish it, with an ETag and 304 to a conditional GET.
	r := b.Do(http.MethodGet, revocationsPath, nil, "")
	etag := r.Header.Get("ETag")
	if r.Status != 200 || etag == "" || !strings.Contains(string(r.Body), good.Signature) {
		t.Fatalf("GET: %d %q %s", r.Status, etag, r.Body)
	}
	if r := b.Do(http.MethodGet, revocationsPath, map[string]string{"If-None-Match": etag}, ""); r.Status != http.StatusNotModified {
		t.Fatalf("conditional GET: %d", r.Status)
	}
}
