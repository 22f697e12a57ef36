//go:build unix && redteam

package extrastest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team (rtnonce): --signature-nonces lowered (to save memory) below
// the default --signature-nonces-per-tree (10,000) is taken silently, and
// then one tree, even one key, fills the whole nonce memory: the issue's
// starvation with no sybils at all. The flags should be refused (or the
// per-tree bound scaled down) when per-tree ≥ the total.
func TestRedteamPerTreeBoundAboveTotal(t *testing.T) {
	e := mcptest.NewEnv(t)
	victim := mcptest.NewKey(t, "victim")
	victimTok := e.Mint(func(p *dct.CreateParams) { p.Delegatee = victim.ID() }, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--require-signature", "--signature-nonces", "20"}})
	tok := e.Mint(nil, "mcp:echo:*")
	bearer := mcptest.Bearer(tok)
	res := srv.Do("POST", "/mcp", with(bearer, sign(t, e.Agent, "POST", "/mcp", initBody, time.Now())), initBody)
	if res.Status != 200 {
		t.Fatalf("initialize: %d %s", res.Status, res.Body)
	}
	sid := res.Header.Get("Mcp-Session-Id")
	for n := range 19 {
		call := ownCall(fmt.Sprint("c", n), tok)
		srv.Post(sid, with(bearer, sign(t, e.Agent, "POST", "/mcp", call, time.Now())), call)
	}
	vb := mcptest.Bearer(victimTok)
	if r := srv.Do("POST", "/mcp", with(vb, sign(t, victim, "POST", "/mcp", initBody, time.Now())), initBody); r.Status != 200 {
		t.Fatalf("one key of one tree filled --signature-nonces 20; another tree is refused: %d %s", r.Status, strings.TrimSpace(string(r.Body)))
	}
}
