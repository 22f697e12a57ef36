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

// Red team (rtnonce): a "tree" is one root-issued token, and a root that
// issues its agent one token per task (the ordinary way `delegateos
// delegate` is used) hands that agent as many trees as tasks. One holder
// with three root tokens (global 30, per tree 10) fills the server's whole
// nonce memory; a principal of another tree is then refused 503
// signature_busy. The per-tree bound only holds one token's flood to a
// tenth: ten tokens of one agent starve everybody, as eleven keys did
// before.
func TestRedteamOneHolderManyRootTokensStarvesOthers(t *testing.T) {
	e := mcptest.NewEnv(t)
	victim := mcptest.NewKey(t, "victim")
	victimTok := e.Mint(func(p *dct.CreateParams) { p.Delegatee = victim.ID() }, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--require-signature",
		"--signature-nonces", "30", "--signature-nonces-per-tree", "10"}})
	accepted := 0
	for k := range 3 {
		tok := e.Mint(nil, "mcp:echo:*") // same root, same agent key: a new tree
		bearer := mcptest.Bearer(tok)
		res := srv.Do("POST", "/mcp", with(bearer, sign(t, e.Agent, "POST", "/mcp", initBody, time.Now())), initBody)
		if res.Status != 200 {
			t.Fatalf("token %d initialize: %d %s", k, res.Status, res.Body)
		}
		accepted++
		sid := res.Header.Get("Mcp-Session-Id")
		for n := range 9 {
			call := ownCall(fmt.Sprintf("t%d-%d", k, n), tok)
			if r := srv.Post(sid, with(bearer, sign(t, e.Agent, "POST", "/mcp", call, time.Now())), call); r.Status == 200 {
				accepted++
			}
		}
	}
	vb := mcptest.Bearer(victimTok)
	res := srv.Do("POST", "/mcp", with(vb, sign(t, victim, "POST", "/mcp", initBody, time.Now())), initBody)
	if res.Status != 200 {
		t.Fatalf("one agent with 3 root tokens took %d nonces; another tree's principal is refused: %d %s", accepted, res.Status, strings.TrimSpace(string(res.Body)))
	}
}

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
