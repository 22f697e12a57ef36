//go:build unix

package extrastest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// ownCall is a tools/call of echo that carries its own token.
func ownCall(id string, tok *dct.Token) string {
	own, _ := json.Marshal(map[string]any{"dct": tok.String()})
	return `{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_delegateos":` + string(own) + `}}`
}

// A holder of one token attenuates it to eleven keys of her own and floods
// a server that requires signatures with signed calls from each. Nonces
// are bounded per delegation tree (the token's root block), which she
// cannot multiply as she can keys: her flood fills her tree's share and is
// refused (503 signature_busy), while a principal of another tree, issued
// by the same root, still gets in. Before, the bound was per key, and
// eleven keys filled the server's whole nonce memory. The same holds with
// the nonces shared in Redis.
func TestNonceFloodCostsOnlyItsTree(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "redis"}[shared], func(t *testing.T) {
			e := mcptest.NewEnv(t)
			pol := e.Policy()
			if shared {
				pol.SpendStore = redistest.Start(t).URL()
			}
			victim := mcptest.NewKey(t, "victim")
			mallory := e.Mint(nil, "mcp:echo:*")
			victimTok := e.Mint(func(p *dct.CreateParams) { p.Delegatee = victim.ID() }, "mcp:echo:*")
			srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature",
				"--signature-nonces", "30", "--signature-nonces-per-tree", "10"}})

			bearer := mcptest.Bearer(mallory)
			res := srv.Do("POST", "/mcp", with(bearer, sign(t, e.Agent, "POST", "/mcp", initBody, time.Now())), initBody)
			if res.Status != 200 {
				t.Fatalf("signed initialize: %d %s", res.Status, res.Body)
			}
			sid := res.Header.Get("Mcp-Session-Id")
			accepted, busy := 0, 0
			for k := range 11 {
				key := mcptest.NewKey(t, fmt.Sprintf("sybil%d", k))
				tok := mcptest.Attenuate(t, mallory, e.Agent, key, 1000, "mcp:echo:*")
				for n := range 3 {
					call := ownCall(fmt.Sprintf("s%d-%d", k, n), tok)
					r := srv.Post(sid, with(bearer, sign(t, key, "POST", "/mcp", call, time.Now())), call)
					switch {
					case r.Status == 200:
						accepted++
					case r.Status == 503 && strings.Contains(string(r.Body), string(avpsig.ReasonBusy)):
						busy++
					default:
						t.Fatalf("sybil %d, call %d: %d %s", k, n, r.Status, r.Body)
					}
				}
			}
			vb := mcptest.Bearer(victimTok)
			res = srv.Do("POST", "/mcp", with(vb, sign(t, victim, "POST", "/mcp", initBody, time.Now())), initBody)
			if res.Status != 200 {
				t.Fatalf("another tree's principal, after the flood: %d %s", res.Status, res.Body)
			}
			call := mcptest.CallBody(`"v1"`, "echo", map[string]any{"text": "hi"})
			if r := srv.Post(res.Header.Get("Mcp-Session-Id"), with(vb, sign(t, victim, "POST", "/mcp", call, time.Now())), call); r.Status != 200 || !strings.Contains(string(r.Body), `"result"`) {
				t.Fatalf("another tree's principal's call, after the flood: %d %s", r.Status, r.Body)
			}
			// The initialize took one of the tree's ten nonces.
			if accepted != 9 || busy != 33-9 {
				t.Fatalf("eleven keys of one tree: %d calls accepted, %d busy; want 9 (the tree's bound) and %d", accepted, busy, 33-9)
			}

		})
	}
}

// A signature dated in the future is refused, beyond a few seconds for
// clocks that differ: within the window it kept its nonce held for up to
// twice the window, which let a flood hold the nonce memory for two
// minutes.
func TestFutureSignatureRefused(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--require-signature"}})
	bearer := mcptest.Bearer(tok)
	for _, c := range []struct {
		ahead time.Duration
		want  int
	}{{30 * time.Second, 401}, {55 * time.Second, 401}, {2 * time.Second, 200}} {
		r := srv.Do("POST", "/mcp", with(bearer, sign(t, e.Agent, "POST", "/mcp", initBody, time.Now().Add(c.ahead))), initBody)
		if r.Status != c.want || (c.want == 401 && !strings.Contains(string(r.Body), string(avpsig.ReasonStale))) {
			t.Fatalf("signed %s ahead: %d %s; want %d", c.ahead, r.Status, r.Body, c.want)
		}
	}
}

// A "tree" is one root-issued token, and a root that issues its agent one
// token per task (the ordinary way `delegateos delegate` is used) hands
// that agent as many trees as tasks. Found by the rtnonce red team: one
// holder with three root tokens (global 30, per tree 10) filled the
// server's whole nonce memory, and a principal of another tree was refused
// 503 signature_busy. With the fair share (a tree takes a nonce only while
// it holds fewer than there are free places), another tree still gets in.
func TestOneHolderManyRootTokensLeavesRoom(t *testing.T) {
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

// --signature-nonces lowered (to save memory) below the default
// --signature-nonces-per-tree (10,000) was taken silently (found by the
// rtnonce red team), and one tree, even one key, could then fill the
// whole nonce memory. Given alone, --signature-nonces now brings the tree
// bound down with it (a tenth); given both, a tree bound not below the
// total stops serve at start, saying why.
func TestSignatureNoncesBelowPerTree(t *testing.T) {
	t.Run("derived", func(t *testing.T) {
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
		accepted, busy := 1, 0
		sid := res.Header.Get("Mcp-Session-Id")
		for n := range 19 {
			call := ownCall(fmt.Sprint("c", n), tok)
			switch r := srv.Post(sid, with(bearer, sign(t, e.Agent, "POST", "/mcp", call, time.Now())), call); {
			case r.Status == 200:
				accepted++
			case r.Status == 503 && strings.Contains(string(r.Body), "signature_busy"):
				busy++
			default:
				t.Fatalf("call %d: %d %s", n, r.Status, r.Body)
			}
		}
		if accepted != 2 || busy != 18 {
			t.Fatalf("one tree with --signature-nonces 20: %d accepted, %d busy; want the derived tree bound, 2", accepted, busy)
		}
		vb := mcptest.Bearer(victimTok)
		if r := srv.Do("POST", "/mcp", with(vb, sign(t, victim, "POST", "/mcp", initBody, time.Now())), initBody); r.Status != 200 {
			t.Fatalf("another tree is refused: %d %s", r.Status, strings.TrimSpace(string(r.Body)))
		}
	})
	t.Run("refused", func(t *testing.T) {
		e := mcptest.NewEnv(t)
		pol := filepath.Join(e.Dir, "policy.yaml")
		mcptest.WriteFile(t, pol, e.Policy().YAML())
		// A serve that takes the flags runs until killed: the deadline
		// only turns that into a failure instead of a hang.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var stderrb bytes.Buffer
		cmd := exec.CommandContext(ctx, mcptest.Delegateos(t), "serve", "--listen", "127.0.0.1:0", "--policy", pol, "--require-signature",
			"--signature-nonces", "20", "--signature-nonces-per-tree", "20", "--", "true")
		cmd.Stderr = &stderrb
		cmd.Env = append(os.Environ(), "DELEGATEOS_STATE_DIR="+t.TempDir())
		_ = cmd.Run()
		stderr, code := stderrb.String(), cmd.ProcessState.ExitCode()
		if code == 0 || ctx.Err() != nil || !strings.Contains(stderr, "--signature-nonces-per-tree (20) must be below --signature-nonces (20)") {
			t.Fatalf("serve --signature-nonces 20 --signature-nonces-per-tree 20: exit %d, %s", code, stderr)
		}
	})
}
