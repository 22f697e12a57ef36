//go:build unix

package proxy_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// A delegation is not a global name (issue 26, item 1). A sybil holding a
// token of her own from the trusted root attenuates it to a second key of
// hers under the delegation ID of the victim (B), records it through the
// real proxy and completes it with a passing attestation. The victim must
// still record her delegation, call under it and complete it, and the
// chain shows two delegations with the ID. Before delegations were
// identified by key, the sybil's completion ended "delB" for everyone and
// the victim's delegate was refused.
func TestE2EDelegationIDCollisionIsHarmless(t *testing.T) {
	r := newDelegationRun(t)
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	aID := r.aTok.Unverified().Authority.DelegationID

	sy := newSybil(t, r, delB)
	// The sybil talks to a second proxy of the same workspace.
	pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
	pol.Rules = pol.Rules[1:]
	pol.RevocationList = r.revs
	pol.Extra = "workspace: " + strconv.Quote(r.ws) + "\nreputation: {completeness: 0.9, clarity: 0.8}\n"
	ss := r.e.StartProxy(mcptest.ProxyOptions{Policy: pol}).Connect(mcptest.SessionOptions{})
	sy.recordAndComplete(sender(t, ss))

	// The victim records her delegation, works under it and completes it.
	if res := r.delegate(r.bContract, r.bTok, aID); !res.Accepted {
		t.Fatalf("the victim's delegate after the sybil's completion: %+v", res)
	}
	if got := r.s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"}); got.Err != nil || got.RPC != nil || got.Res.IsError {
		t.Fatalf("the victim's call: %+v", got)
	}
	// A call carrying the victim's token itself, from another session.
	if got := ss.CallAs(t, r.bTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"}); got.Err != nil || got.RPC != nil || got.Res.IsError {
		t.Fatalf("a call with the victim's token: %+v", got)
	}

	// The chain shows two delegations with the ID, each with its status.
	var ds []struct{ ID, Key, Status, To string }
	if err := json.Unmarshal([]byte(r.cli("chain", "show", "--workspace", r.ws, "--json")), &ds); err != nil {
		t.Fatal(err)
	}
	var victim, theirs int
	keys := map[string]bool{}
	for _, d := range ds {
		if !dct.ValidDelegationKey(d.Key) || keys[d.Key] {
			t.Errorf("chain show --json: %s has key %q", d.ID, d.Key)
		}
		keys[d.Key] = true
		switch {
		case d.ID == delB && d.To == r.b.ID() && d.Status == "active":
			victim++
		case d.ID == delB && d.To == sy.key2.ID() && d.Status == "completed":
			theirs++
		}
	}
	if victim != 1 || theirs != 1 {
		t.Fatalf("chain show --json: %+v; want the victim's %s active and the sybil's completed", ds, delB)
	}
	text := r.cli("chain", "show", "--workspace", r.ws)
	if n := strings.Count(text, delB); n != 2 || strings.Count(text, "  key ") != 2 {
		t.Errorf("chain show shows %s %d times, not as two delegations told apart by key:\n%s", delB, n, text)
	}

	done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 100)
	if done.Status != "completed" || !done.Verified || done.DelegationID != delB || len(done.Problems) != 0 {
		t.Fatalf("the victim's complete (her reputation recorded too): %+v", done)
	}
	// Each has her own RDP contract: the sybil's outcome took nothing of
	// the victim's.
	for _, who := range []string{r.b.ID(), sy.key2.ID()} {
		var prof struct {
			Dimensions []struct {
				Name       string `json:"name"`
				SampleSize int    `json:"sampleSize"`
			} `json:"dimensions"`
		}
		out := r.cli("reputation", "show", "--workspace", r.ws, "--json", "--", who)
		if err := json.Unmarshal([]byte(out), &prof); err != nil {
			t.Fatalf("reputation show: %v\n%s", err, out)
		}
		n := 0
		for _, d := range prof.Dimensions {
			if d.Name == "reliability" {
				n = d.SampleSize
			}
		}
		if n != 1 {
			t.Errorf("%s has %d reliability signals; want 1, her own:\n%s", who, n, out)
		}
	}
}

// attestFor is a passing completion attestation by k.
func attestFor(t *testing.T, k *identity.Keypair, contractID, del string) json.RawMessage {
	t.Helper()
	a, err := attest.Create(k, attest.CreateParams{ContractID: contractID, DelegationID: del, Success: true,
		Output: json.RawMessage(`{"summary":"a summary of more than twenty characters"}`), CostMicrocents: 0, DurationMs: 10}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sybilRun is a sybil's token and contract reusing a victim's delegation
// ID: a root token of her own, attenuated to her second key under the
// victim's ID, with a contract she signs.
type sybilRun struct {
	t         *testing.T
	id        string
	key, key2 *identity.Keypair
	root, tok *dct.Token
	contract  *contract.TaskContract
}

func newSybil(t *testing.T, r *delegationRun, id string) *sybilRun {
	t.Helper()
	sy := &sybilRun{t: t, id: id, key: mcptest.NewKey(t, "sybil"), key2: mcptest.NewKey(t, "sybil2")}
	sy.root = r.e.Mint(func(p *dct.CreateParams) { p.Delegatee = sy.key.ID(); p.ContractID = "ct_5555555555aa" }, "docs:read:/project/**")
	var err error
	sy.tok, err = dct.Attenuate(sy.root, dct.AttenuateParams{Attenuator: sy.key, Delegatee: sy.key2.ID(), DelegationID: id, ContractID: "ct_5555555555bb"})
	if err != nil {
		t.Fatal(err)
	}
	sy.contract, err = contract.Create(sy.key, contract.CreateParams{ID: "ct_5555555555bb", Title: "Anything at all",
		Inputs:              json.RawMessage(`{}`),
		OutputSchema:        json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`),
		Verification:        json.RawMessage(`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":20}}`),
		MaxBudgetMicrocents: 5000, Deadline: time.Now().Add(time.Hour), MaxChainDepth: 0, RequiredCapabilities: []string{"docs:read"},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return sy
}

// recordAndComplete records the sybil's delegation (delegateos/delegate)
// and completes it with a passing attestation by her second key.
func (sy *sybilRun) recordAndComplete(send func(method string, params any) *transport.JSONRPCResponse) {
	t := sy.t
	t.Helper()
	cb, _ := json.Marshal(sy.contract)
	if res := decodeResult[gate.DelegateResult](t, send(gate.MethodDelegate, gate.DelegateParams{
		Contract: cb, DCT: sy.tok.String(), DCTFormat: dct.Format, DelegationID: sy.id, ParentDelegationID: sy.root.Unverified().Authority.DelegationID})); !res.Accepted {
		t.Fatalf("the sybil's delegate: %+v", res)
	}
	a := attestFor(t, sy.key2, sy.contract.ID, sy.id)
	if done := decodeResult[gate.CompleteResult](t, send(gate.MethodComplete, gate.CompleteParams{DelegationID: sy.id, Attestation: a})); done.Status != "completed" {
		t.Fatalf("the sybil's complete: %+v", done)
	}
}

// sender sends delegateos/ requests through a session's transport.
func sender(t *testing.T, s *mcptest.Session) func(method string, params any) *transport.JSONRPCResponse {
	n := 0
	return func(method string, params any) *transport.JSONRPCResponse {
		t.Helper()
		n++
		resp, err := s.Wire.SendRequest(mcptest.Context(t), transport.JSONRPCRequest{JSONRPC: "2.0",
			ID: mcp.NewRequestId("sybil-" + strconv.Itoa(n)), Method: method, Params: params})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return resp
	}
}

// The same attack across a fleet: the victim's delegation is recorded at
// one proxy, the sybil's at another with its own workspace, both sharing
// the ended-delegation set in Redis. The sybil's completion reaches the
// victim's proxy (her own token is refused there) but ends nothing of the
// victim's. Before keys, the set said "delB ended" and every proxy refused
// the victim.
func TestE2EFleetDelegationIDCollision(t *testing.T) {
	srv := redistest.Start(t)
	r := newDelegationRun(t)
	start := func(ws string) (*mcptest.Process, *mcptest.Session) {
		revs := filepath.Join(r.e.Dir, filepath.Base(ws)+"-revocations.json")
		mcptest.WriteFile(t, revs, "[]\n")
		pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
		pol.Rules = pol.Rules[1:]
		pol.RevocationList = revs
		pol.Extra = "workspace: " + strconv.Quote(ws) + "\nended_delegations: " + strconv.Quote(srv.URL()) + "\n"
		p := r.e.StartProxy(mcptest.ProxyOptions{Policy: pol})
		return p, p.Connect(mcptest.SessionOptions{})
	}
	ws1 := filepath.Join(r.e.Dir, "ws1")
	r.p, r.s = start(ws1)
	r.ws = ws1
	_, other := start(filepath.Join(r.e.Dir, "ws2"))
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	read := func(s *mcptest.Session, tok *dct.Token) mcptest.Result {
		return s.CallAs(t, tok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
	}
	read(r.s, r.bTok).OK(t, "the victim's call before the attack")
	sy := newSybil(t, r, delB)
	sy.recordAndComplete(sender(t, other))
	mcptest.Eventually(t, "the victim's proxy to refuse the sybil's ended token", func() bool {
		got := read(r.s, sy.tok)
		return got.Err != nil || got.RPC != nil
	})
	read(r.s, r.bTok).OK(t, "the victim's call at her proxy after the sybil's completion")
	read(other, r.bTok).OK(t, "the victim's call at the sybil's proxy")
	r.s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"}).OK(t, "the victim's session")
	if done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 500); done.Status != "completed" {
		t.Fatalf("the victim's complete: %+v", done)
	}
}
