package main

import (
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// Which tasks an ATTESTATION may rate (rtldp3 #3, #4).

// TestLDPAttestationSelfDealingThroughSubDelegation: the delegate's own key holds a
// token and delegates it on to a second key of its operator's (a sybil).
// The sybil opens a session, runs a task and attests the delegate's work
// positively: the signal is recorded in the delegate's workspace. The
// workspace's existing self-dealing rule (reputation.RecordOutcome: "an
// agent never earns reputation from its own delegation: when the delegate
// ... appears among the ancestors ... it delegated, directly or through
// others, to the delegator that now rates it") is not applied to
// ATTESTATION, which checked only that from_did is not to_did (rtldp3 #3).
// Now the delegate refuses ATTESTATION_REFUSED an attestation of a task
// whose token's chain (issuer, every holder) names its own key.
func TestLDPAttestationSelfDealingThroughSubDelegation(t *testing.T) {
	env := mcptest.NewEnv(t)
	serverKey := mcptest.NewKey(t, "server")
	srv, ws := peerServe(t, env, serverKey, "")
	sybil := mcptest.NewKey(t, "sybil")
	own := env.Mint(func(p *dct.CreateParams) { p.Delegatee = serverKey.ID() }, "mcp:echo:*")
	sub := mcptest.Attenuate(t, own, serverKey, sybil, 1000)
	s := peerOpen(t, srv, "ldp:delegate:sybil", sybil, sub)
	if reply := peerSubmit(t, s, "self", "echo", `"mine"`, nil); peerFailCode(reply) != "" {
		t.Fatalf("task: %+v", reply.Body)
	}
	before := peerSignals(t, ws, serverKey.DID())
	code := peerSend(t, s, peerAttestation(t, sybil, serverKey.DID(), "self", true))
	if after := peerSignals(t, ws, serverKey.DID()); after != before {
		t.Fatalf("the delegate rated its own work through a key it delegated to: signals %d -> %d (ATTESTATION answered %q)", before, after, code)
	}
	if code != ldp.CodeAttestationRefused {
		t.Fatalf("refused with %q, want ATTESTATION_REFUSED", code)
	}
}

// TestLDPAttestationOfRefusedTask: a task the gate refused (the token does not
// grant the skill's capability) did no work and cost nothing, yet it
// "ended", so its initiator may attest the delegate's work on it. Any
// holder of any token the gate accepts rates the delegate once per such
// task, for free: here three negative signals from three refused tasks.
// 'ldp submit --record' itself records nothing for a refusal ("says
// nothing of the delegate's competence"); the delegate's side recorded it
// (rtldp3 #4). Now only a task that produced a result or failed in the
// delegate's own categories is attestable: ATTESTATION_TASK_REFUSED.
func TestLDPAttestationOfRefusedTask(t *testing.T) {
	env := mcptest.NewEnv(t)
	serverKey := mcptest.NewKey(t, "server")
	srv, ws := peerServe(t, env, serverKey, "")
	noEcho := env.Mint(nil, "docs:read:/**")
	s := peerOpen(t, srv, "ldp:delegate:rival", env.Agent, noEcho)
	before := peerSignals(t, ws, serverKey.DID())
	var codes []string
	for _, id := range []string{"r1", "r2", "r3"} {
		reply := peerSubmit(t, s, id, "echo", `"x"`, nil)
		if peerFailCode(reply) != "capability_not_granted" {
			t.Fatalf("task %s: %+v", id, reply.Body)
		}
		codes = append(codes, peerSend(t, s, peerAttestation(t, env.Agent, serverKey.DID(), id, false)))
	}
	if after := peerSignals(t, ws, serverKey.DID()); after != before {
		t.Fatalf("tasks the gate refused (no work, no charge) were rated: signals %d -> %d (ATTESTATION answered %q)", before, after, codes)
	}
	for _, c := range codes {
		if c != ldp.CodeAttestationRefusedTask {
			t.Fatalf("refused with %q, want %s", codes, ldp.CodeAttestationRefusedTask)
		}
	}
	if n := len(srv.LogWith("decision", func(l map[string]any) bool { return l["tool"] == "echo" && l["allowed"] == true })); n != 0 {
		t.Fatalf("%d calls allowed", n)
	}
}
