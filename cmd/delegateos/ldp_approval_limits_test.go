package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// Limits of the tasks an LDP delegate holds for approval (rtldp3's breaks,
// fixed): what a waiting task holds, and how many one delegation tree may
// hold.

// TestLDPApprovalWaitReleasesBodyBudget: an LDP envelope's body is read
// within the server's budget of bodies in flight, from the anonymous
// share (an eighth: 8 MiB by default), and given back only when the reply
// is written. A task held for approval keeps its body's share for as long
// as it waits (2 minutes by default, up to an hour). One token holder
// sends 16 tasks (the per-initiator cap) of 512 KiB each: the anonymous
// share is full, so every LDP envelope of every other peer, every
// anonymous MCP body, and the approvers' own answers at /ldp/approvals
// are refused 503 until the tasks end: nobody can approve or decline
// them (rtldp3 #6: the approver's 'ldp approve' and another peer's HELLO
// got 503). Now a task gives its share back before it waits, and
// approvals are read outside the budget.
func TestLDPApprovalWaitReleasesBodyBudget(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := peerApprovalServe(t, env, approver, "required", "")
	s := peerOpen(t, srv, "ldp:delegate:hog", env.Agent, env.Mint(nil, "mcp:echo:*"))
	const size = 512 << 10
	for i := range 16 {
		id := fmt.Sprintf("hold-%02d", i)
		pad := size
		var body []byte
		for {
			body = peerTask(t, s.ID, "ldp:delegate:hog", id, strings.Repeat("a", pad), env.Agent)
			if len(body) == size {
				break
			}
			pad += size - len(body)
		}
		peerHeld(t, srv, body)
	}
	ids := peerAwaiting(t, srv, 16)
	var broke []string
	out, errs, code := mcptest.CLI(t, "ldp", "approve", "--key", env.KeyFile(approver), srv.Base, ids["hold-00"])
	if code != 0 {
		broke = append(broke, fmt.Sprintf("the approver's answer: exit %d %s%s", code, out, errs))
	}
	hello := peerSign(t, peerEnvelope("", "ldp:delegate:other", &ldp.Hello{DelegateID: "ldp:delegate:other", SupportedModes: []ldp.PayloadMode{ldp.ModeText}}, ldp.ModeText),
		mcptest.NewKey(t, "other").PrivateKey())
	if status, _, body := peerPost(t, srv, "", hello, ""); status != http.StatusOK {
		broke = append(broke, fmt.Sprintf("another peer's HELLO: HTTP %d %s", status, body))
	}
	if len(broke) > 0 {
		t.Fatalf("16 tasks of one holder waiting for approval hold the anonymous body share:\n%s", strings.Join(broke, "\n"))
	}
}

// TestLDPApprovalCapPerTree: at most 16 tasks of one initiator waited for
// approval, 256 in all, the initiator counted by its key, and a holder
// makes as many keys as it likes: it delegated its token on to 16 keys of
// its own (one attenuation each) and filled the 256 places, so another
// holder was refused approval_unavailable at once (rtldp3 #7). Now places
// are counted per delegation tree (the token's root delegation, which its
// holders cannot multiply, as AVP-Sig counts nonces): the 16 keys' 256
// tasks get 16 places between them (the rest refused approval_unavailable
// at once), and another holder's task waits.
func TestLDPApprovalCapPerTree(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := peerApprovalServe(t, env, approver, "required", "")
	own := env.Mint(nil, "mcp:echo:*")
	var replies []<-chan *ldp.Envelope
	for k := range 16 {
		sybil := mcptest.NewKey(t, fmt.Sprintf("sybil-%02d", k))
		from := fmt.Sprintf("ldp:delegate:sybil-%02d", k)
		s := peerOpen(t, srv, from, sybil, mcptest.Attenuate(t, own, env.Agent, sybil, 10_000))
		for i := range 16 {
			replies = append(replies, peerHeld(t, srv, peerTask(t, s.ID, from, fmt.Sprintf("hold-%02d-%02d", k, i), "x", sybil)))
		}
	}
	refused := 0
	mcptest.Eventually(t, "240 of one tree's tasks refused", func() bool {
		for i, r := range replies {
			if r == nil {
				continue
			}
			select {
			case got := <-r:
				if code := peerFailCode(got); code != "approval_unavailable" {
					t.Fatalf("a task over the tree's share answered %q, want approval_unavailable", code)
				}
				refused++
				replies[i] = nil
			default:
			}
		}
		return refused >= 240
	})
	if ids := peerAwaiting(t, srv, 16); len(ids) != 16 {
		t.Fatalf("%d of one tree's tasks wait, want 16", len(ids))
	}
	victimKey := mcptest.NewKey(t, "victim")
	victimTok := env.Mint(func(p *dct.CreateParams) { p.Delegatee = victimKey.ID() }, "mcp:echo:*")
	vs := peerOpen(t, srv, "ldp:delegate:victim", victimKey, victimTok)
	reply := peerHeld(t, srv, peerTask(t, vs.ID, "ldp:delegate:victim", "victim", "mine", victimKey))
	var got *ldp.Envelope
	mcptest.Eventually(t, "the victim's task waits or ends", func() bool {
		select {
		case got = <-reply:
			return true
		default:
		}
		return len(srv.LogWith("LDP task awaits approval", func(l map[string]any) bool { return l["task"] == "victim" })) > 0
	})
	if got != nil {
		t.Fatalf("one holder's token, delegated on to 16 keys of its own, took every place: another holder's task is refused %q: %+v", peerFailCode(got), got.Body)
	}
	if n := len(peerAwaiting(t, srv, 17)); n != 17 {
		t.Fatalf("%d tasks wait, want 17", n)
	}
}
