package main

import (
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestLDPApproverNotInTheTokensChain: an approver approved its own call
// by delegating its token to a key of its own (rtldp4 #5): the
// approval refuses only the task's signer and its token's holder
// (waiting.initiators), not the holders the token passed through. The
// approver (one of ldp.approvers, also a token holder) attenuates its
// token to a fresh key, which opens a session and submits a task a rule
// holds for approval; the approver approves it and it runs. This is the
// self-dealing the ATTESTATION rule refuses through the chain (rtldp3 #3),
// and what "the initiator does not approve its own task" is there to
// prevent. Now every holder of the task's token chain (not its root
// issuer) counts as an initiator: the approver is refused 403, and
// another approver's answer is taken.
func TestLDPApproverNotInTheTokensChain(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := env.Agent // one of the approvers, and the holder of a token
	other := mcptest.NewKey(t, "other-approver")
	rule := mcptest.Priced("echo", 100)
	rule.Approval = "required"
	pol := env.Policy(rule)
	pol.Extra = strings.Replace(peerSection, "  skills:", "  approvers: ["+approver.DID()+", "+other.DID()+"]\n  skills:", 1)
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	own := env.Mint(nil, "mcp:echo:*")
	sybil := mcptest.NewKey(t, "sybil")
	s := peerOpen(t, srv, "ldp:delegate:sybil", sybil, mcptest.Attenuate(t, own, approver, sybil, 10_000))
	reply := peerHeld(t, srv, peerTask(t, s.ID, "ldp:delegate:sybil", "mine", "x", sybil))
	id := peerAwaiting(t, srv, 1)["mine"]
	code, out := peerApprove(t, env, srv, approver, id)
	if code != 0 && !strings.Contains(out, "holds the token") {
		t.Fatalf("the approver in the chain: exit %d: %s", code, out)
	}
	if code == 0 {
		got := <-reply
		if _, ok := got.Body.(*ldp.TaskResult); ok {
			t.Fatalf("an approver approved its own call, sent by a key it delegated its token to: the task ran (%s)", out)
		}
		t.Fatalf("an approver's approval of a task under its own token's chain was taken (%s); the task: %+v", out, got.Body)
	}
}
