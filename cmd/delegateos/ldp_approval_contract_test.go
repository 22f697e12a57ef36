package main

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/ldp"
)

// A task held for approval is held to its contract's terms when it is
// answered, not only when it was submitted (rtldp3 #8, fixed).

// TestLDPApprovalRechecksContractBudget: a contract's budget is checked
// against the quote for the task (the policy in force) when the task is
// submitted; a task held for approval is then decided afresh, with the
// policy in force when the approver answers. A reload during the wait
// raises echo from 100 to 300 microcents: the approved task runs and is
// charged 300 under a contract whose budget is 200 (rtldp3 #8: it ran,
// cost 300). Now the terms are checked again after the wait: the call is
// sent back declined and the task refused CONTRACT_REFUSED.
func TestLDPApprovalRechecksContractBudget(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := peerApprovalServe(t, env, approver, "required", "")
	path := peerPolicyPath(srv)
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	max := 2e-6 // 200 microcents
	c := &ldp.DelegationContract{ContractID: "c1", Objective: "echo", CreatedAt: "2026-01-01T00:00:00Z",
		Policy: ldp.PolicyEnvelope{FailurePolicy: ldp.FailClosed, Budget: &ldp.BudgetPolicy{MaxCostUSD: &max}}}
	reply := peerSubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "c", Skill: "echo", Input: json.RawMessage(`"x"`), Contract: c})
	id := peerAwaiting(t, srv, 1)["c"]
	yaml, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mcptest.WriteFile(t, path, strings.Replace(string(yaml), "cost: 100", "cost: 300", 1))
	srv.Signal(syscall.SIGHUP)
	srv.WaitLog("policy reloaded", nil)
	if code, out := peerApprove(t, env, srv, approver, id); code != 0 {
		t.Fatalf("approve: %s", out)
	}
	got := <-reply
	if res, ok := got.Body.(*ldp.TaskResult); ok {
		t.Fatalf("a contract with a budget of 200 microcents ran at %d (the policy reloaded while it waited for approval)",
			*res.Provenance.DelegateOS.CostChargedMicrocents)
	}
	if code := peerFailCode(got); code != ldp.CodeContract {
		t.Fatalf("refused %q, want %s", code, ldp.CodeContract)
	}
}

// TestLDPApprovalEndsAtContractDeadline: a contract's deadline was
// checked when the task was submitted, not after it waited for approval:
// a task whose contract ended 5 s after it was sent was approved once the
// deadline had passed, and ran (rtldp3 #8). Now the wait ends at the
// contract's deadline: the task is refused CONTRACT_REFUSED, without the
// approver, and the approver's late answer finds nothing to approve.
func TestLDPApprovalEndsAtContractDeadline(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := peerApprovalServe(t, env, approver, "required", "")
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	deadline := time.Now().Add(5 * time.Second)
	c := &ldp.DelegationContract{ContractID: "c1", Objective: "echo", CreatedAt: timestamp.Format(time.Now()), Deadline: timestamp.Format(deadline),
		Policy: ldp.PolicyEnvelope{FailurePolicy: ldp.FailClosed}}
	reply := peerSubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "d", Skill: "echo", Input: json.RawMessage(`"x"`), Contract: c})
	id := peerAwaiting(t, srv, 1)["d"]
	got := <-reply
	if got == nil {
		t.Fatalf("a task waiting for approval past its contract's deadline (%s) was still waiting", timestamp.Format(deadline))
	}
	if code := peerFailCode(got); code != ldp.CodeContract {
		t.Fatalf("a task waiting for approval past its contract's deadline (%s) answered %s %q, want %s", timestamp.Format(deadline), got.Body.Type(), code, ldp.CodeContract)
	}
	if code, out := peerApprove(t, env, srv, approver, id); code == 0 {
		t.Fatalf("the approver approved a task whose contract's deadline had passed: %s", out)
	}
	if n := len(srv.LogWith("decision", func(l map[string]any) bool { return l["tool"] == "echo" && l["outcome"] == "result" })); n != 0 {
		t.Fatalf("echo ran %d times", n)
	}
}
