package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestServeLDPApproval: a task whose call a rule holds for approval waits
// for one of the policy's ldp.approvers, never for the peer that asked: its
// initiator is told the approval's ID (TASK_UPDATE), as is the server's
// log; 'ldp approve' by a key that is not an approver, or by the task's
// own initiator (even one listed), is refused; the approver's answer runs
// the task (charged once) or declines it (approval_declined); an answer
// counts once. A delegate that names no approvers refuses such a task at
// once, saying why.
func TestServeLDPApproval(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	approverKey, agentKey, strangerKey := env.KeyFile(approver), env.KeyFile(env.Agent), env.KeyFile(mcptest.NewKey(t, "stranger"))
	rule := mcptest.Priced("echo", 100)
	rule.Approval = "required"
	pol := env.Policy(rule)
	pol.Extra = strings.Replace(serveLDPSection, "  skills:", "  approvers: ["+approver.DID()+", "+env.Agent.DID()+"]\n  skills:", 1) +
		"audit_log: " + strconv.Quote(filepath.Join(env.Dir, "audit.log")) + "\n"
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}},
		&ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	idPattern := regexp.MustCompile(`ldpappr_[0-9a-f]{32}`)
	approve := func(key, id string, extra ...string) (string, string, int) {
		return mcptest.CLI(t, append(append([]string{"ldp", "approve", "--key", key}, extra...), srv.Base, id)...)
	}

	// Streamed: the initiator learns the approval's ID from a TASK_UPDATE.
	ids := make(chan string, 1)
	replies := make(chan *ldp.Envelope, 1)
	go func() {
		reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t1", Skill: "echo", Input: json.RawMessage(`"approved"`)}, "", nil, func(e *ldp.Envelope) {
			if u, ok := e.Body.(*ldp.TaskUpdate); ok && u.Message != nil {
				ids <- idPattern.FindString(*u.Message)
			}
		})
		if err != nil {
			t.Error(err)
		}
		replies <- reply
	}()
	var id string
	select {
	case id = <-ids:
	case r := <-replies:
		t.Fatalf("the task ended without waiting for an approver: %+v", r.Body)
	}
	if id == "" {
		t.Fatal("the TASK_UPDATE names no approval")
	}
	line := srv.WaitLog("LDP task awaits approval", func(l map[string]any) bool { return l["approval_id"] == id })
	if !strings.Contains(line["request"].(string), "delegateos: approve tool echo (capability mcp:echo:*)") {
		t.Fatalf("the log says %v", line)
	}
	for _, c := range []struct{ name, key, want string }{
		{"a stranger", strangerKey, "is not one of this delegate's approvers"},
		{"the task's initiator", agentKey, "its initiator does not approve its own task"},
	} {
		if out, errs, code := approve(c.key, id); code != 1 || !strings.Contains(errs, c.want) {
			t.Fatalf("%s: exit %d\n%s%s", c.name, code, out, errs)
		}
	}
	if out, errs, code := approve(approverKey, id); code != 0 || out != "approved "+id+" as "+approver.DID()+"\n" {
		t.Fatalf("the approver: exit %d\n%s%s", code, out, errs)
	}
	reply := <-replies
	srv.WaitLog("LDP approval answered", func(l map[string]any) bool {
		return l["approval_id"] == id && l["approver"] == approver.DID() && l["approved"] == true
	})
	res, ok := reply.Body.(*ldp.TaskResult)
	// Its provenance names the receipts of the call that ran (the one
	// sent back with the answer), which its attestation names too.
	if !ok || !strings.Contains(string(res.Output), `"text":"approved"`) || *res.Provenance.DelegateOS.CostChargedMicrocents != 100 ||
		len(res.Provenance.DelegateOS.ReceiptHashes) != 2 || res.Provenance.DelegateOS.AttestationID == "" {
		t.Fatalf("the approved task: %+v", reply.Body)
	}
	if _, errs, code := approve(approverKey, id); code != 1 || !strings.Contains(errs, "no task is waiting for approval") {
		t.Fatalf("the same answer again: exit %d\n%s", code, errs)
	}

	// Not streamed: the operator finds the ID in the log, and declines.
	go func() {
		reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t2", Skill: "echo", Input: json.RawMessage(`"declined"`)}, "", nil, nil)
		if err != nil {
			t.Error(err)
		}
		replies <- reply
	}()
	line = srv.WaitLog("LDP task awaits approval", func(l map[string]any) bool { return l["task"] == "t2" })
	if out, errs, code := approve(approverKey, line["approval_id"].(string), "--decline"); code != 0 || !strings.HasPrefix(out, "declined ") {
		t.Fatalf("decline: exit %d\n%s%s", code, out, errs)
	}
	reply = <-replies
	if f, ok := reply.Body.(*ldp.TaskFailed); !ok || f.Error.Code != "approval_declined" || f.Error.Category != "policy" {
		t.Fatalf("the declined task: %+v", reply.Body)
	}
	if n := len(srv.LogWith("decision", func(l map[string]any) bool {
		return l["tool"] == "echo" && l["allowed"] == true && l["outcome"] == "result"
	})); n != 1 {
		t.Fatalf("%d echo calls ran, want 1", n)
	}

	// Without approvers: refused at once, saying why.
	plain := env.Policy(rule)
	plain.Extra = serveLDPSection
	other := env.StartServe(mcptest.ServeOptions{Policy: plain, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "other"))}})
	s2, err := c.Open(ctx, other.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}},
		&ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reply, err = s2.Submit(ctx, &ldp.TaskSubmit{TaskID: "t3", Skill: "echo", Input: json.RawMessage(`"x"`)}, "", nil, nil)
	if f, ok := reply.Body.(*ldp.TaskFailed); err != nil || !ok || f.Error.Code != "approval_unavailable" ||
		!strings.Contains(f.Error.Message, "an LDP peer is not asked (it would approve its own task), and this delegate names no approvers (ldp.approvers)") {
		t.Fatalf("without approvers: %v %+v", err, reply)
	}
}
