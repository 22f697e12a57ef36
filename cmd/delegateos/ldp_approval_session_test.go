package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// A task waiting for approval lives no longer than its session (rtldp3
// #9, fixed): closed or expired, the session takes the task and its
// approval with it.

// TestLDPApprovalEndsWithSessionClose: the initiator closes its session
// (SESSION_CLOSE, acknowledged) while a task of it waits for approval. The
// task kept waiting; the approver approved it and it ran and was charged,
// in a session that no longer existed (rtldp3 #9). Now the close ends the
// task before it is acknowledged: its approval is gone (the approver is
// answered 404), the task is answered TASK_CANCELLED, and echo never runs.
func TestLDPApprovalEndsWithSessionClose(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := peerApprovalServe(t, env, approver, "required", "")
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	reply := peerSubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "c", Skill: "echo", Input: json.RawMessage(`"x"`)})
	id := peerAwaiting(t, srv, 1)["c"]
	if err := s.Close(context.Background(), "done"); err != nil {
		t.Fatal(err)
	}
	code, out := peerApprove(t, env, srv, approver, id)
	if code == 0 || !strings.Contains(out, "404") && !strings.Contains(out, "no task is waiting") {
		t.Fatalf("the approver approved a task of a closed session (exit %d): %s", code, strings.TrimSpace(out))
	}
	got := <-reply
	if got == nil || peerFailCode(got) != "TASK_CANCELLED" {
		t.Fatalf("a task of a closed session answered %v, want %s", got, "TASK_CANCELLED")
	}
	if n := len(srv.LogWith("decision", func(l map[string]any) bool { return l["tool"] == "echo" && l["outcome"] == "result" })); n != 0 {
		t.Fatalf("echo ran %d times", n)
	}
}

// TestLDPApprovalEndsWithSessionExpiry: a session with a 2 s TTL expires
// while its task waits for approval: the task is answered TASK_CANCELLED
// (its session expired) without anyone's answer, and the approval is gone.
func TestLDPApprovalEndsWithSessionExpiry(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := peerApprovalServe(t, env, approver, "required", "")
	ttl := uint64(2)
	c := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := c.Open(context.Background(), srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}, TTLSecs: &ttl},
		&ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reply := peerSubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "e", Skill: "echo", Input: json.RawMessage(`"x"`)})
	id := peerAwaiting(t, srv, 1)["e"]
	got := <-reply
	if got == nil || peerFailCode(got) != "TASK_CANCELLED" {
		t.Fatalf("a task whose session expired while it waited answered %v, want %s", got, "TASK_CANCELLED")
	}
	if f, ok := got.Body.(*ldp.TaskFailed); !ok || !strings.Contains(f.Error.Message, "expired") {
		t.Fatalf("the task's failure does not say its session expired: %+v", got.Body)
	}
	if code, out := peerApprove(t, env, srv, approver, id); code == 0 {
		t.Fatalf("the approver approved a task of an expired session: %s", out)
	}
}
