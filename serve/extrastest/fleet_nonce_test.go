//go:build unix

package extrastest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// signRequestHeaders runs delegateos sign-request for an initialize to url
// and returns its headers with the token's bearer header.
func signRequestHeaders(t *testing.T, e *mcptest.Env, tok *dct.Token, url, name string) map[string]string {
	t.Helper()
	body := filepath.Join(e.Dir, name+".json")
	mcptest.WriteFile(t, body, initBody)
	out, errs, code := mcptest.CLI(t, "sign-request", "--key", e.KeyFile(e.Agent), "--data", "@"+body, url)
	if code != 0 {
		t.Fatalf("sign-request: %d %s", code, errs)
	}
	hdr := mcptest.Bearer(tok)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		hdr[k] = v
	}
	return hdr
}

// Two servers that share a Redis spend store with --require-signature
// accept a signed request once between them: the request one accepted,
// sent as it is (same headers, same body) to the other, is refused as
// replayed, while a fresh signature is accepted there. With Redis down a
// signed request is refused (signature_store_unavailable), never
// accepted; once it is back, the spent nonce is still spent.
func TestFleetRefusesReplayAtOtherServer(t *testing.T) {
	e := mcptest.NewEnv(t)
	rs := redistest.Start(t)
	tok := e.Mint(nil, "mcp:echo:*")
	pol := e.Policy()
	pol.SpendStore = rs.URL()
	a := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature"}})
	b := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature"}})

	// Both listen on 127.0.0.1 and the path is the same: the host is not
	// signed, so one signature is good for either server.
	hdr := signRequestHeaders(t, e, tok, a.URL, "init")
	if r := a.Do("POST", "/mcp", hdr, initBody); r.Status != 200 {
		t.Fatalf("server A, the signed initialize: %d %s", r.Status, r.Body)
	}
	if r := b.Do("POST", "/mcp", hdr, initBody); r.Status != 401 || !strings.Contains(string(r.Body), string(avpsig.ReasonReplayed)) {
		t.Fatalf("server B, the same request: %d %s", r.Status, r.Body)
	}
	if r := a.Do("POST", "/mcp", hdr, initBody); r.Status != 401 || !strings.Contains(string(r.Body), string(avpsig.ReasonReplayed)) {
		t.Fatalf("server A, the same request again: %d %s", r.Status, r.Body)
	}
	bearer := mcptest.Bearer(tok)
	fresh := b.Do("POST", "/mcp", with(bearer, sign(t, e.Agent, "POST", "/mcp", initBody, time.Now())), initBody)
	if fresh.Status != 200 {
		t.Fatalf("server B, a fresh signature: %d %s", fresh.Status, fresh.Body)
	}
	// The session B made works, with a signed call.
	sid := fresh.Header.Get("Mcp-Session-Id")
	note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	if r := b.Post(sid, with(bearer, sign(t, e.Agent, "POST", "/mcp", note, time.Now())), note); r.Status != 202 {
		t.Fatalf("server B, initialized: %d %s", r.Status, r.Body)
	}
	call := mcptest.CallBody("1", "echo", map[string]any{"text": "hi"})
	if r := b.Post(sid, with(bearer, sign(t, e.Agent, "POST", "/mcp", call, time.Now())), call); r.Status != 200 || !strings.Contains(string(r.Body), `"result"`) {
		t.Fatalf("server B, a signed call: %d %s", r.Status, r.Body)
	}
	for _, s := range []*mcptest.Server{a, b} {
		if !strings.Contains(s.Log(), "signature nonces are shared in Redis") {
			t.Errorf("the log does not say the nonces are shared:\n%s", s.Log())
		}
	}

	rs.Stop()
	for name, s := range map[string]*mcptest.Server{"A": a, "B": b} {
		r := s.Do("POST", "/mcp", with(bearer, sign(t, e.Agent, "POST", "/mcp", initBody, time.Now())), initBody)
		if r.Status != 503 || !strings.Contains(string(r.Body), string(avpsig.ReasonUnavailable)) {
			t.Fatalf("server %s with Redis down: %d %s", name, r.Status, r.Body)
		}
	}
	// Redis back: fresh signatures pass again, and the nonce spent before
	// is still spent.
	rs.Restart()
	for name, s := range map[string]*mcptest.Server{"A": a, "B": b} {
		mcptest.Eventually(t, "server "+name+" accepts a fresh signature once Redis is back", func() bool {
			return s.Do("POST", "/mcp", with(bearer, sign(t, e.Agent, "POST", "/mcp", initBody, time.Now())), initBody).Status == 200
		})
		if r := s.Do("POST", "/mcp", hdr, initBody); r.Status != 401 || !strings.Contains(string(r.Body), string(avpsig.ReasonReplayed)) {
			t.Fatalf("server %s, the first request once Redis is back: %d %s", name, r.Status, r.Body)
		}
	}
}

// A fleet that shares only its revocation list on Redis shares nonces
// there too.
func TestFleetSharesNoncesInRevocationRedis(t *testing.T) {
	e := mcptest.NewEnv(t)
	rs := redistest.Start(t)
	tok := e.Mint(nil, "mcp:echo:*")
	pol := e.Policy()
	pol.RevocationList = rs.URL()
	a := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature"}})
	b := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature"}})
	hdr := with(mcptest.Bearer(tok), sign(t, e.Agent, "POST", "/mcp", initBody, time.Now()))
	if r := b.Do("POST", "/mcp", hdr, initBody); r.Status != 200 {
		t.Fatalf("server B: %d %s", r.Status, r.Body)
	}
	if r := a.Do("POST", "/mcp", hdr, initBody); r.Status != 401 || !strings.Contains(string(r.Body), string(avpsig.ReasonReplayed)) {
		t.Fatalf("server A, the same request: %d %s", r.Status, r.Body)
	}
}

// Without Redis a server keeps nonces in its own memory, as before: it
// accepts a signed request once. A second such server does not know that
// nonce, which is why a fleet should share a Redis.
func TestServerWithoutRedisKeepsNoncesInMemory(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	pol := e.Policy()
	pol.SpendStore = filepath.Join(e.Dir, "spend.log")
	a := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature"}})
	b := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--require-signature"}})
	hdr := signRequestHeaders(t, e, tok, a.URL, "init")
	if r := a.Do("POST", "/mcp", hdr, initBody); r.Status != 200 {
		t.Fatalf("the signed initialize: %d %s", r.Status, r.Body)
	}
	if r := a.Do("POST", "/mcp", hdr, initBody); r.Status != 401 || !strings.Contains(string(r.Body), string(avpsig.ReasonReplayed)) {
		t.Fatalf("the same request again: %d %s", r.Status, r.Body)
	}
	if r := b.Do("POST", "/mcp", hdr, initBody); r.Status != 200 {
		t.Fatalf("another server without a shared store: %d %s", r.Status, r.Body)
	}
	if strings.Contains(a.Log(), "signature nonces are shared") {
		t.Errorf("a server without Redis says its nonces are shared:\n%s", a.Log())
	}
}

// Servers that share nonces need not share --signature-window: a fleet
// whose window is being changed, one server at a time, runs both. A nonce
// spent at the server with the short window must then be remembered for
// as long as the server with the long window takes its timestamp, or the
// same signed request, sent to that server once the short-lived key has
// expired, is accepted a second time.
// Found by the fourth red team (was TestRedteam4NonceOutlivesLongestWindowOfFleet).
func TestFleetNonceOutlivesLongestWindow(t *testing.T) {
	e := mcptest.NewEnv(t)
	rs := redistest.Start(t)
	tok := e.Mint(nil, "mcp:echo:*")
	pol := e.Policy()
	pol.SpendStore = rs.URL()
	// The long-window server runs first; then one with a short window.
	e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature", "--signature-window", "2m"}})
	short := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature", "--signature-window", "10s"}})

	signed := time.Now()
	hdr := with(mcptest.Bearer(tok), sign(t, e.Agent, "POST", "/mcp", initBody, signed))
	if r := short.Do("POST", "/mcp", hdr, initBody); r.Status != 200 {
		t.Fatalf("the short-window server, a signed initialize: %d %s", r.Status, r.Body)
	}
	ctx := context.Background()
	keys, err := rs.Client().Keys(ctx, "delegateos:nonce:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("nonce keys %v (%v); want one", keys, err)
	}
	ttl, err := rs.Client().PTTL(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The long-window server takes the timestamp until signed + 2m.
	if until := time.Until(signed.Add(2 * time.Minute)); ttl < until {
		t.Errorf("the nonce %s expires in %s, but the server with a 2m window takes its signature for %s more: a replay there is then accepted", strings.TrimPrefix(keys[0], "delegateos:nonce:"), ttl, until.Round(time.Second))
	}
}

// A server whose window is longer than the fleet's (the first server's,
// recorded in Redis) refuses to start, saying how to raise the fleet's:
// the servers already running forget nonces sooner than it would take
// their signatures. One with the fleet's window, or a shorter one, starts.
// Found by the fourth red team (was TestRedteam4LongerWindowThanFleetRefusesToStart).
func TestFleetLongerSignatureWindowRefusesToStart(t *testing.T) {
	e := mcptest.NewEnv(t)
	rs := redistest.Start(t)
	pol := e.Policy()
	pol.SpendStore = rs.URL()
	e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature", "--signature-window", "10s"}})
	path := filepath.Join(e.Dir, "long.yaml")
	mcptest.WriteFile(t, path, pol.YAML())
	_, errs, code := mcptest.CLI(t, "serve", "--listen", "127.0.0.1:0", "--policy", path, "--require-signature", "--signature-window", "2m", "--", mcptest.Docserver(t), "--root", e.Docs)
	if code == 0 || !strings.Contains(errs, "delegateos:nonce-window") {
		t.Fatalf("a server with a 2m window in a fleet of 10s: exit %d, %s", code, errs)

	}
	e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature", "--signature-window", "5s"}})
	if v, err := rs.Client().Get(context.Background(), "delegateos:nonce-window").Result(); err != nil || v != "10000" {
		t.Fatalf("the fleet's window: %q (%v); want 10000 ms", v, err)
	}
}
