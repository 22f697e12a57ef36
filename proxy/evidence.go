package proxy

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/receipt"
)

// Evidence receives what signed receipts are made of: every gate
// decision, allowed or refused, and every forwarded call that ends. Both
// are called on the relay's path, so they must only hand the record over
// (audit.Log queues it for its writer).
type Evidence interface {
	Decided(*receipt.Decision)
	Executed(*receipt.Execution)
	// Approval signs a human approval receipt and returns its digest; it
	// waits for the writer, and is called only when an approval ends.
	Approval(*receipt.HumanApprovalBody) (string, error)
	// Failed reports that receipts can no longer be kept: every request
	// the gate would decide is then refused (EvidenceUnavailable), since
	// it would leave no evidence.
	Failed() bool
}

// evidenceDown reports whether receipts can no longer be kept.
func (s *session) evidenceDown() bool { return s.cfg.Evidence != nil && s.cfg.Evidence.Failed() }

// callEvidence is what a gated request's receipts need beyond its
// decision.
type callEvidence struct {
	payload   [32]byte // the request as the client sent it
	args      [32]byte // its params.arguments, when hasArgs
	hasArgs   bool
	clearArgs []byte // a copy of params.arguments, when receipts include them
	forwarded [32]byte
	response  [32]byte
	hasResp   bool
	result    []byte // a copy of the result, when receipts include results
	decision  *receipt.Decision
	token     string // the token the request was decided with
	// A call held for approval: its decision's audit_id, given before the
	// approval receipt names it; the approval's ID and its receipt's
	// digest; waiting marks a decision answered before the approval came
	// (MCP 2026-07-28).
	auditID, approvalID, approvalHash string
	waiting                           bool
}

// notePayload hashes a gated request as the client sent it.
func (s *session) notePayload(p *pending, frame []byte) {
	if s.cfg.Evidence != nil {
		if s.sent != nil {
			frame = s.sent
		}
		p.ev.payload = sha256.Sum256(frame)
	}
}

// noteArguments hashes a request's params.arguments (and keeps a copy
// when the policy puts arguments into receipts).
func (s *session) noteArguments(p *pending, args []byte) {
	if s.cfg.Evidence == nil || args == nil {
		return
	}
	p.ev.args, p.ev.hasArgs = sha256.Sum256(args), true
	if s.gateOf(p).Policy.Receipts.IncludeArguments {
		p.ev.clearArgs = append([]byte(nil), args...)
	}
}

// decided hands a decision over for its receipt. An allowed request's
// record is kept in p for its execution receipt.
func (s *session) decided(p *pending, d *gate.Decision) {
	if s.cfg.Evidence == nil {
		return
	}
	at := p.start
	if at.IsZero() {
		at = time.Now()
	}
	rec := &receipt.Decision{
		Method: p.method, Target: p.target, Scope: d.Scope, Token: p.ev.token, Requested: gate.Requested(d.Call),
		Allowed: d.Allowed, Unauthenticated: d.Unauthenticated, Enforced: d.Allowed || !s.cfg.Observe,
		Payload: p.ev.payload, ArgumentsHash: p.ev.args, HasArguments: p.ev.hasArgs, Arguments: p.ev.clearArgs, At: at,
		AuditID: p.ev.auditID, ApprovalID: p.ev.approvalID, ApprovalReceiptHash: p.ev.approvalHash, Waiting: p.ev.waiting,
	}
	if p.snap != nil {
		rec.PolicyHash = p.snap.PolicyDigest
	}
	if d.Reservation != nil {
		rec.CostReserved = d.Reservation.Cost()
	}
	if d.Denial != nil {
		rec.DenialType, rec.DenialDetail = string(d.Denial.Type), render.Escaped(d.Denial.Detail)
		if d.Denial.Requested != nil {
			rec.Requested = d.Denial.Requested
		}
	}
	if d.Allowed {
		p.ev.decision = rec
	}
	s.cfg.Evidence.Decided(rec)
}

// approvalBody is o's human_approval_receipt/2, for the decision p will be
// given (its audit_id is chosen here).
func (s *session) approvalBody(p *pending, o *ApprovalOutcome) *receipt.HumanApprovalBody {
	id := o.ID
	if id == "" {
		id = receipt.NewUUIDURN()
	}
	b := &receipt.HumanApprovalBody{
		ApprovalID: id, GateAuditID: receipt.NewUUIDURN(), RequesterAgentDID: agentDID(p.dec.Scope),
		Action: receipt.Action(p.method), Resource: p.target, RiskClass: "approval", GateReason: "the policy asks for a person's approval",
		Decision: strings.ToUpper(o.Verdict), Reason: "approved", RequestedAt: timestamp.Format(o.RequestedAt),
		DecidedAt: timestamp.Format(o.DecidedAt), Cost: o.Cost, AnswerAction: o.Action, AnswerHash: o.ContentHash,
	}
	if a, rule, ok := s.gateOf(p).ApprovalRule(p.method, p.dec.Call.Rule); ok {
		b.RiskClass = "approval_required"
		if !a.Required && a.Above != nil {
			b.RiskClass = fmt.Sprintf("cost_above_%d", *a.Above)
		}
		b.GateReason = fmt.Sprintf("%s rule %s (line %d) asks for a person's approval", mapOf(p.method), render.Name(rule.Match), rule.Line)
	}
	if !o.Approved {
		b.Reason = o.Detail
	}
	if !o.ExpiresAt.IsZero() {
		b.ExpiresAt = timestamp.Format(o.ExpiresAt)
	}
	if o.Action != "" {
		b.AnsweredBy = o.Answerer
	}
	if o.RequestHash != "" {
		b.RequestHash = "sha256:" + o.RequestHash
	}
	return b
}

// agentDID is the did:key of a scope's delegatee; "" without a scope.
func agentDID(scope *dct.AuthorizedScope) string {
	if scope == nil {
		return ""
	}
	did, err := identity.DIDFromPrincipalID(scope.Delegatee)
	if err != nil {
		return ""
	}
	return did
}

// mapOf names the policy map whose rules decide a method.
func mapOf(method string) string {
	switch method {
	case gate.MethodPromptsGet:
		return "prompts"
	case gate.MethodResourcesRead:
		return "resources"
	}
	return "tools"
}

// noteForwarded hashes a gated request as it is forwarded.
func (s *session) noteForwarded(p *pending, frame []byte, edits []edit) {
	if p.ev.decision != nil {
		p.ev.forwarded = hashEdited(frame, edits)
	}
}

// noteResponse hashes the response to a gated request as it is returned.
func (s *session) noteResponse(p *pending, frame []byte, edits []edit) {
	if p.ev.decision == nil {
		return
	}
	p.ev.response, p.ev.hasResp = hashEdited(frame, edits), true
	if s.gateOf(p).Policy.Receipts.IncludeResults {
		if r := objectMember(frame, `"result"`); r != nil {
			at := memberOffset(frame, r)
			p.ev.result = editedSpan(frame, at, at+len(r), edits)
		}
	}
}

// executed hands a forwarded call's end over for its execution receipt;
// when later is set (the server's pump settling a response), at the end of
// the pump's batch (endServerBatch).
func (s *session) executed(p *pending, cost int64, outcome string, later bool) {
	if p.ev.decision == nil || outcome == outcomeNotForwarded {
		return
	}
	e := &receipt.Execution{
		Decision: p.ev.decision, Request: p.ev.forwarded, Response: p.ev.response, HasResponse: p.ev.hasResp,
		Result: p.ev.result, CostCommitted: cost, Started: p.start, Completed: time.Now(), Outcome: outcome,
	}
	p.ev.decision = nil
	if later {
		s.serverExec = append(s.serverExec, e)
		return
	}
	s.cfg.Evidence.Executed(e)
}

// editedSpan is a copy of frame[from:to] with the edits that fall inside
// it made (as the client receives it); edits outside it are ignored.
func editedSpan(frame []byte, from, to int, edits []edit) []byte {
	out := make([]byte, 0, to-from)
	at := from
	for _, e := range sortedEdits(edits) {
		if e.from < from || e.to > to {
			continue
		}
		out = append(append(out, frame[at:e.from]...), e.with...)
		at = e.to
	}
	return append(out, frame[at:to]...)
}

// sortedEdits is a copy of edits (at most a few) in the order of where
// they apply.
func sortedEdits(edits []edit) []edit {
	es := append([]edit(nil), edits...)
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].from < es[j-1].from; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	return es
}

// hashEdited is the SHA-256 of frame with edits made, as queueEdited
// writes it (without the line ending).
func hashEdited(frame []byte, edits []edit) [32]byte {
	h := sha256.New()
	var sorted [4]edit
	es := append(sorted[:0], edits...)
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].from < es[j-1].from; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	at := 0
	for _, e := range es {
		h.Write(frame[at:e.from])
		h.Write(e.with)
		at = e.to
	}
	h.Write(frame[at:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}
