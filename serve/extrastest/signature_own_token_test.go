//go:build unix

package extrastest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// A message's own params._delegateos token decides which key must sign it
// only where the relay decides the message with that token. Someone who
// copied a session's bearer token and id, but not its holder's key, must
// not get a ping, a tasks/ request or a notification into that session by
// naming a token of their own that the relay then ignores.
func TestIgnoredOwnTokenDoesNotChooseSigner(t *testing.T) {
	e := mcptest.NewEnv(t)
	mallory := mcptest.NewKey(t, "mallory")
	tok := e.Mint(nil, "mcp:echo:*")
	mTok := e.Mint(func(p *dct.CreateParams) { p.Delegatee = mallory.ID() }, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--require-signature"}})
	bearer := mcptest.Bearer(tok)

	res := srv.Do("POST", "/mcp", with(bearer, sign(t, e.Agent, "POST", "/mcp", initBody, time.Now())), initBody)
	if res.Status != 200 {
		t.Fatalf("signed initialize: %d %s", res.Status, res.Body)
	}
	sid := res.Header.Get("Mcp-Session-Id")
	note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	if r := srv.Post(sid, with(bearer, sign(t, e.Agent, "POST", "/mcp", note, time.Now())), note); r.Status != 202 {
		t.Fatalf("initialized: %d %s", r.Status, r.Body)
	}
	own, _ := json.Marshal(map[string]any{"dct": mTok.String()})
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":"m1","method":"ping","params":{"_delegateos":` + string(own) + `}}`,
		`{"jsonrpc":"2.0","id":"m2","method":"tasks/list","params":{"_delegateos":` + string(own) + `}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"1","_delegateos":` + string(own) + `}}`,
	} {
		r := srv.Post(sid, with(bearer, sign(t, mallory, "POST", "/mcp", body, time.Now())), body)
		if r.Status != 401 && r.Status != 403 {
			t.Errorf("%.60s…: signed by a key other than the session token's holder: HTTP %d %.80s", body, r.Status, strings.TrimSpace(string(r.Body)))
		}
	}
}
