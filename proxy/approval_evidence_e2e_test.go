//go:build unix

package proxy_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/receiptschema"
	"github.com/delegateos/delegateos/receipt"
)

// TestApprovalReceipts: with an audit log, each approval leaves a signed
// human approval receipt; the decision receipt that follows names it
// (approval_id, approval_receipt_hash) under the audit_id the approval
// names, and so does the approved call's execution receipt, whose
// request hash is the one the approval was given for. A declined call's
// decision is a BLOCK naming its approval, with no execution.
func TestApprovalReceipts(t *testing.T) {
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := e.Policy()
	for i := range pol.Rules {
		if pol.Rules[i].Match == "write_file" {
			pol.Rules[i].Cost, pol.Rules[i].Approval = 100, "required"
		}
	}
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	tok := e.Mint(nil, "docs:write:/project/**")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
	a := &approver{answer: func(req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		if strings.Contains(req.Params.Message, "/project/yes.md") {
			return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})
		}
		return answerWith(mcp.ElicitationResponseActionDecline, nil)
	}}
	s := p.Connect(mcptest.SessionOptions{Legacy: true, ClientOptions: []client.ClientOption{client.WithElicitationHandler(a)}})
	s.Call(t, "write_file", writeArgs("/project/yes.md")).OK(t, "approved write_file")
	if r := s.Call(t, "write_file", writeArgs("/project/no.md")); !isDenial(r, gate.ApprovalDeclined) {
		t.Fatalf("declined write_file: %+v %v", r.RPC, r.Err)
	}
	p.Stdin.Close()
	if !p.WaitExit(20 * time.Second) {
		t.Fatal("the proxy did not exit after its input closed")
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", key.DID()); code != 0 {
		t.Fatalf("audit verify: status %d\n%s%s", code, out, stderr)
	}
	rs, lines := logReceipts(t, logPath)
	for i, l := range lines {
		if err := receiptschema.Validate(bytes.TrimSuffix(l, []byte("\n"))); err != nil {
			t.Errorf("line %d does not follow its JSON Schema: %v", i+1, err)
		}
	}
	var approvals []*receipt.Receipt
	decisions := map[string]*receipt.DecisionBody{} // by approval_id
	executions := map[string]*receipt.ExecutionBody{}
	for _, r := range rs {
		switch b := r.Body.(type) {
		case *receipt.HumanApprovalBody:
			approvals = append(approvals, r)
		case *receipt.DecisionBody:
			if b.ApprovalID != "" {
				decisions[b.ApprovalID] = b
			}
		case *receipt.ExecutionBody:
			executions[b.GateAuditID] = b
		}
	}
	if len(approvals) != 2 {
		t.Fatalf("%d approval receipts, want 2", len(approvals))
	}
	for i, want := range []struct {
		decision, gate, action string
	}{{receipt.ApprovalApproved, receipt.DecisionAllow, "accept"}, {receipt.ApprovalDeclined, receipt.DecisionBlock, "decline"}} {
		ar := approvals[i]
		ab := ar.Body.(*receipt.HumanApprovalBody)
		if ab.Decision != want.decision || ab.AnswerAction != want.action || ab.AnsweredBy != "mcptest/0" || len(ab.AnswerHash) != 64 ||
			ab.Cost != 100 || ab.RiskClass != "approval_required" || !strings.HasPrefix(ab.RequestHash, "sha256:") ||
			ab.Action != "mcp.tools.call" || ab.Resource != "write_file" || !strings.HasPrefix(ab.ApprovalID, "delegateos-approval-") {
			t.Errorf("approval receipt %d: %+v", i, ab)
		}
		d := decisions[ab.ApprovalID]
		if d == nil {
			t.Fatalf("no decision receipt names approval %s", ab.ApprovalID)
		}
		if d.Decision != want.gate || d.ApprovalReceiptHash != ar.Digest || d.AuditID != ab.GateAuditID {
			t.Errorf("decision for approval %d: %s audit_id %s approval_receipt_hash %s; want %s %s %s", i, d.Decision, d.AuditID, d.ApprovalReceiptHash, want.gate, ab.GateAuditID, ar.Digest)
		}
		x := executions[d.AuditID]
		if want.gate == receipt.DecisionBlock {
			if d.DenialType != string(gate.ApprovalDeclined) || x != nil {
				t.Errorf("declined call: denial %q, execution %+v", d.DenialType, x)
			}
			continue
		}
		if x == nil || x.ApprovalReceiptHash != ar.Digest || x.RequestHash != ab.RequestHash || x.Status != receipt.StatusSuccess {
			t.Errorf("approved call's execution %+v; want approval_receipt_hash %s and request_hash %s", x, ar.Digest, ab.RequestHash)
		}
	}
}

// TestApprovalReceiptsModern: a 2026-07-28 client's first attempt leaves a
// WAITING_FOR_HUMAN_APPROVAL decision naming the approval; the approval
// receipt and the decision of the call sent back name the same approval.
func TestApprovalReceiptsModern(t *testing.T) {
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := e.Policy()
	for i := range pol.Rules {
		if pol.Rules[i].Match == "write_file" {
			pol.Rules[i].Approval = "required"
		}
	}
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: e.Mint(nil, "docs:write:/project/**")})
	a := &approver{answer: func(mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})
	}}
	s := p.Connect(mcptest.SessionOptions{ClientOptions: []client.ClientOption{client.WithElicitationHandler(a)}})
	s.Call(t, "write_file", writeArgs("/project/m.md")).OK(t, "approved write_file")
	p.Stdin.Close()
	if !p.WaitExit(20 * time.Second) {
		t.Fatal("the proxy did not exit after its input closed")
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", key.DID()); code != 0 {
		t.Fatalf("audit verify: status %d\n%s%s", code, out, stderr)
	}
	rs, lines := logReceipts(t, logPath)
	for i, l := range lines {
		if err := receiptschema.Validate(bytes.TrimSuffix(l, []byte("\n"))); err != nil {
			t.Errorf("line %d does not follow its JSON Schema: %v", i+1, err)
		}
	}
	var kinds []string
	var approvalID string
	for _, r := range rs {
		switch b := r.Body.(type) {
		case *receipt.DecisionBody:
			if b.ApprovalID == "" {
				continue
			}
			kinds = append(kinds, b.Decision)
			if approvalID == "" {
				approvalID = b.ApprovalID
			} else if b.ApprovalID != approvalID {
				t.Errorf("decisions name approvals %s and %s", approvalID, b.ApprovalID)
			}
		case *receipt.HumanApprovalBody:
			kinds = append(kinds, b.Decision)
			if b.ApprovalID != approvalID {
				t.Errorf("the approval receipt's approval_id %s is not the waiting decision's %s", b.ApprovalID, approvalID)
			}
		case *receipt.ExecutionBody:
			kinds = append(kinds, "execution "+b.Status)
		}
	}
	want := []string{receipt.DecisionWaiting, receipt.ApprovalApproved, receipt.DecisionAllow, "execution " + receipt.StatusSuccess}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Errorf("receipts %v, want %v", kinds, want)
	}
}
