//go:build unix

package extrastest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

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
