//go:build unix

package serve_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/revocation"
)

const initializeBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

// initStatus is the HTTP status of an initialize with tok.
func initStatus(srv *mcptest.Server, tok *dct.Token) int {
	return srv.Do(http.MethodPost, "/mcp", mcptest.Bearer(tok), initializeBody).Status
}

// One token holder cannot take every session: not with one token
// (--max-credential-sessions), nor with tokens of her own attenuated from
// it (--max-tree-sessions); another principal still gets a session.
func TestServeSessionCapsPerCredentialAndTree(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{
		"--max-sessions", "6", "--max-credential-sessions", "2", "--max-tree-sessions", "4"}})
	hers := e.Mint(nil, "mcp:echo:*")
	for range 2 {
		srv.Initialize(mcptest.Bearer(hers))
	}
	if got := initStatus(srv, hers); got != http.StatusTooManyRequests {
		t.Fatalf("a third session with one token over --max-credential-sessions 2: HTTP %d", got)
	}
	// Another spelling of the header is the same token.
	if r := srv.Do(http.MethodPost, "/mcp", map[string]string{"Authorization": "bearer  " + hers.String()}, initializeBody); r.Status != http.StatusTooManyRequests {
		t.Fatalf("a third session with one token spelled otherwise: HTTP %d %s", r.Status, r.Body)
	}
	sybil := mcptest.NewKey(t, "sybil")
	a := mcptest.Attenuate(t, hers, e.Agent, sybil, 1000, "mcp:echo:*")
	b := mcptest.Attenuate(t, hers, e.Agent, sybil, 1000, "mcp:echo:*")
	srv.Initialize(mcptest.Bearer(a))
	srv.Initialize(mcptest.Bearer(a))
	if got := initStatus(srv, b); got != http.StatusTooManyRequests {
		t.Fatalf("a fifth session in one delegation tree over --max-tree-sessions 4: HTTP %d", got)
	}
	other := e.Mint(nil, "mcp:echo:*") // another root token: another tree
	sid := srv.Initialize(mcptest.Bearer(other))
	if r := srv.Post(sid, mcptest.Bearer(other), mcptest.CallBody("1", "echo", map[string]any{"text": "x"})); r.Status != http.StatusOK {
		t.Fatalf("another principal's call: HTTP %d %s", r.Status, r.Body)
	}
}

// sessionUpstreamPID is the process ID of the upstream of session sid.
func sessionUpstreamPID(t *testing.T, srv *mcptest.Server, sid string) int {
	t.Helper()
	m := srv.WaitLog("upstream started", func(m map[string]any) bool { return m["session"] == sid[:8] })
	pid, _ := m["pid"].(float64)
	if pid <= 0 {
		t.Fatalf("upstream started without a pid: %v", m)
	}
	return int(pid)
}

func ping(srv *mcptest.Server, sid string, tok *dct.Token) *mcptest.HTTPResponse {
	return srv.Post(sid, mcptest.Bearer(tok), `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
}

// Once a token is revoked its sessions hold no slot and no upstream: the
// session that sends a request (an ungated ping) is closed then, the one
// that sends nothing at the next recheck, and another principal can start
// a session at once.
func TestServeRevokedTokenSessionsClosed(t *testing.T) {
	e := mcptest.NewEnv(t)
	list := filepath.Join(e.Dir, "revocations.json")
	mcptest.WriteFile(t, list, "[]\n")
	pol := e.Policy()
	pol.RevocationList = list
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{
		"--max-sessions", "2", "--recheck-interval", "200ms"}})
	tok := e.Mint(nil, "mcp:echo:*")
	pinging, quiet := srv.Initialize(mcptest.Bearer(tok)), srv.Initialize(mcptest.Bearer(tok))
	pids := []int{sessionUpstreamPID(t, srv, pinging), sessionUpstreamPID(t, srv, quiet)}
	if r := ping(srv, pinging, tok); r.Status != http.StatusOK {
		t.Fatalf("ping before the revocation: HTTP %d %s", r.Status, r.Body)
	}
	if out, errs, code := mcptest.CLI(t, "revoke", "--key", e.KeyFile(e.Root), "--token", tok.String(), "--block", "0", "--list", list); code != 0 {
		t.Fatalf("revoke: %d %s %s", code, out, errs)
	}
	if r := ping(srv, pinging, tok); r.Status != http.StatusUnauthorized {
		t.Fatalf("ping in a session whose token was revoked: HTTP %d %s", r.Status, r.Body)
	}
	for _, pid := range pids {
		mcptest.Eventually(t, "the revoked sessions' upstreams to exit", func() bool { return mcptest.ProcessGone(pid) })
	}
	mcptest.Eventually(t, "the revoked sessions to end", func() bool {
		return ping(srv, quiet, tok).Status == http.StatusNotFound
	})
	other := e.Mint(nil, "mcp:echo:*")
	for range 2 {
		srv.Initialize(mcptest.Bearer(other))
	}
}

// A revocation pushed to the server closes the sessions of the token it
// revokes at once, without waiting for a request or a recheck.
func TestServeRevocationPushClosesSessions(t *testing.T) {
	e := mcptest.NewEnv(t)
	list := filepath.Join(e.Dir, "revocations.json")
	mcptest.WriteFile(t, list, "[]\n")
	pol := e.Policy()
	pol.RevocationList = list
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--recheck-interval", "1h"}})
	tok := e.Mint(nil, "mcp:echo:*")
	sid := srv.Initialize(mcptest.Bearer(tok))
	pid := sessionUpstreamPID(t, srv, sid)
	entry, err := revocation.NewEntry(e.Root, tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "delegateos/revoke", "params": map[string]any{"revocation": entry}})
	if r := srv.Do(http.MethodPost, "/.well-known/delegateos/revocations", map[string]string{"Content-Type": "application/json"}, string(body)); r.Status != http.StatusAccepted {
		t.Fatalf("push: HTTP %d %s", r.Status, r.Body)
	}
	mcptest.Eventually(t, "the revoked session's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	srv.WaitLog("closing the session", nil)
}
