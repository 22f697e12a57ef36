package proxy

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
)

// approvalIDPrefix starts the id of every request the proxy sends the
// client to ask for an approval; a random part per session follows, so
// that no upstream can send a request under an id the proxy's answers
// are matched by.
const approvalIDPrefix = "delegateos-approval-"

// maxHeld bounds the calls held for approval at once: each one is a form
// a person has to answer.
const maxHeld = 16

// ApprovalOutcome is the evidence of one approval the proxy asked for:
// what was asked, who answered and how.
type ApprovalOutcome struct {
	// ID is the id of the proxy's elicitation/create request, or for an
	// MCP 2026-07-28 client the requestState it issued; "" when nobody was
	// asked. Receipts name the approval by it (approval_id).
	ID string
	// Method and Target are the held request's method and what it names.
	Method, Target string
	// Capability is what the call requested, as namespace:action:resource.
	Capability string
	// Cost is what the call reserved, in microcents.
	Cost int64
	// DelegationID is the delegation of the call's token; "" if it had none.
	DelegationID string
	// RequestHash is the SHA-256 (hex) of the request exactly as it is
	// forwarded if approved.
	RequestHash string
	// Answerer is the client that answered, as its initialize clientInfo
	// named it ("name/version").
	Answerer string
	// Action is the answer's action (accept, decline, cancel); "" when
	// no answer came.
	Action string
	// ContentHash is the SHA-256 (hex) of the answer's result as the
	// client wrote it; "" when no answer came.
	ContentHash string
	// Approved is set only when the action was accept and the form's
	// approve field was true.
	Approved bool
	// Verdict is how it ended: VerdictApproved, VerdictDeclined,
	// VerdictCancelled, VerdictTimeout or VerdictUnavailable.
	Verdict string
	// Denial is the denial type when not approved, and Detail says why.
	Denial dct.DenialType
	Detail string
	// RequestedAt is when the request was sent, DecidedAt when the outcome
	// was known, ExpiresAt when the wait would have ended.
	RequestedAt, DecidedAt, ExpiresAt time.Time
}

// How an approval ended (ApprovalOutcome.Verdict).
const (
	VerdictApproved    = "approved"
	VerdictDeclined    = "declined"    // declined, or submitted without approve
	VerdictCancelled   = "cancelled"   // cancelled by the person or the client
	VerdictTimeout     = "timeout"     // no answer in time
	VerdictUnavailable = "unavailable" // nobody could be asked, or the answer could not be read
)

// refused records why the approval did not let the call through.
func (o *ApprovalOutcome) refused(verdict string, t dct.DenialType, detail string) {
	o.Verdict, o.Denial, o.Detail = verdict, t, detail
}

// heldCall is a request waiting for a person's approval. It is in no
// pending table: the upstream has not seen it and cannot answer it.
type heldCall struct {
	p *pending
	// fwd is the request exactly as it is forwarded if approved: the
	// upstream's id is set and _delegateos cut out.
	fwd     []byte
	outcome ApprovalOutcome
	timer   *time.Timer
	// token is the token the call was decided with ("" if none), checked
	// again before the call is forwarded.
	token string
}

// approvals are the calls a session holds for approval. The session's
// lock guards them.
type approvals struct {
	// prefix is approvalIDPrefix and this session's random part.
	prefix string
	seq    int64
	byAsk  map[string]*heldCall
	byKey  map[requestID]*heldCall
	// elicit is set when the client's initialize declared form
	// elicitation; answerer names the client.
	elicit   bool
	answerer string
	closed   bool
	// trips are the approvals asked of 2026-07-28 clients, by requestState
	// (approval_mrtr.go).
	trips map[string]*roundTrip
}

// needsApproval reports whether an allowed call waits for approval: a
// tools/call, prompts/get or resources/read whose rule asks for it.
func (s *session) needsApproval(p *pending) bool {
	if p.decision == nil {
		return false
	}
	a, ok := s.gateOf(p).Approval(p.method, p.decision.Call.Rule)
	return ok && a.Needed(p.cost())
}

// awaitsApproval reports whether an allowed call is held for approval
// (observe mode asks nobody).
func (s *session) awaitsApproval(p *pending) bool {
	return !s.cfg.Observe && s.needsApproval(p)
}

// hold keeps an allowed call that needs approval from the upstream and
// asks the client for the approval; the call is forwarded only when the
// answer approves it, and a client that cannot be asked gets it refused at
// once. It reports false, having done nothing, when the call is to be
// forwarded now: in observe mode, which asks nobody.
func (s *session) hold(p *pending, h header, cp *callParams, frame []byte) bool {
	if s.cfg.Observe {
		s.log.Info("approval not asked in observe mode", zap.String("method", p.method), zap.String("target", p.target))
		return false
	}
	if why := s.cfg.ApprovalElsewhere; why != "" {
		s.refuseUnasked(p, gate.ApprovalUnavailable, why)
		return true
	}
	if m, modern, bad := readModernParams(h.params); bad != "" {
		s.refuseUnasked(p, gate.ApprovalUnavailable, "the request cannot be read for its approval: "+bad)
		return true
	} else if modern {
		s.holdModern(p, h, cp, frame, m)
		return true
	}
	now := time.Now()
	ap, _ := s.gateOf(p).Approval(p.method, p.decision.Call.Rule)
	wait := ap.Wait()
	s.mu.Lock()
	a := &s.appr
	var why string
	switch {
	case !a.elicit:
		why = "the client did not declare the elicitation capability (form mode) in initialize, so no one can be asked to approve " + p.what()
	case len(a.byAsk) >= maxHeld:
		why = fmt.Sprintf("%d calls are already waiting for approval", maxHeld)
	case a.closed:
		why = "the session is ending"
	}
	if why != "" {
		s.mu.Unlock()
		s.refuseUnasked(p, gate.ApprovalUnavailable, why)
		return true
	}
	if a.prefix == "" {
		var r [16]byte
		_, _ = rand.Read(r[:])
		a.prefix = approvalIDPrefix + hex.EncodeToString(r[:]) + "-"
		a.byAsk, a.byKey = map[string]*heldCall{}, map[requestID]*heldCall{}
	}
	a.seq++
	ask := a.prefix + strconv.FormatInt(a.seq, 10)
	answerer := a.answerer
	s.mu.Unlock()

	// The upstream's id is chosen now, so that the bytes approved are the
	// bytes forwarded.
	s.upSeq++
	p.up = s.upSeq
	fwd := s.forwardBytes(frame, h, cp, p.up, p)
	sum := sha256.Sum256(fwd)
	hc := &heldCall{p: p, fwd: fwd, token: s.callToken(cp)}
	hc.outcome = ApprovalOutcome{
		ID: ask, Method: p.method, Target: p.target, Capability: capabilityText(p.decision),
		Cost: p.cost(), DelegationID: delegationOf(p.decision), RequestHash: hex.EncodeToString(sum[:]),
		Answerer: answerer, RequestedAt: now, ExpiresAt: now.Add(wait),
	}
	req, err := approvalRequest(ask, hc, cp.arguments)
	if err != nil {
		s.refuseUnasked(p, gate.ApprovalUnavailable, "the approval request cannot be written: "+err.Error())
		return true
	}
	s.mu.Lock()
	if a.closed {
		s.mu.Unlock()
		s.refuseUnasked(p, gate.ApprovalUnavailable, "the session is ending")
		return true
	}
	a.byAsk[ask] = hc
	a.byKey[p.key] = hc
	s.mu.Unlock()
	s.log.Info("approval asked", zap.String("method", p.method), zap.String("target", p.target),
		zap.String("approval_id", ask), zap.Int64("cost", hc.outcome.Cost), zap.Duration("timeout", wait))
	s.toClient.write(req)
	// The wait starts once the request is out, unless it was answered
	// (or the session ended) already.
	s.mu.Lock()
	if a.byAsk[ask] == hc {
		hc.timer = time.AfterFunc(wait, func() { s.approvalTimedOut(ask) })
	}
	s.mu.Unlock()
	return true
}

// approvalAnswer takes the client's response to one of the proxy's
// approval requests, and reports whether the response was one (a response
// under the proxy's prefix that answers no held call — a second answer, a
// late one, or one to an id never asked — is dropped: the upstream never
// asked for it).
func (s *session) approvalAnswer(h header, frame []byte) bool {
	ask, ours := s.approvalID(h.id)
	if !ours {
		return false
	}
	hc := s.unhold(ask)
	if hc == nil {
		s.log.Warn("approval answer to no waiting call dropped", zap.String("approval_id", clip(ask, 128)))
		return true
	}
	o := &hc.outcome
	o.DecidedAt = time.Now()
	o.judge(readApprovalAnswer(frame))
	s.concluded(hc.p, o)
	if !o.Approved {
		s.refuseHeld(hc.p, o.Denial, o.Detail, &s.clientLog, true)
		hc.p.free()
		return true
	}
	s.forwardHeld(hc)
	return true
}

// approvalTimedOut refuses a held call whose approval did not come in
// time, and tells the client to stop asking.
func (s *session) approvalTimedOut(ask string) {
	s.mu.Lock()
	hc := s.appr.byAsk[ask]
	if hc == nil || s.appr.closed {
		s.mu.Unlock()
		return
	}
	s.dropLocked(hc)
	s.mu.Unlock()
	o := &hc.outcome
	o.DecidedAt = time.Now()
	o.refused(VerdictTimeout, gate.ApprovalDeclined, fmt.Sprintf("no answer to the approval request within %s", o.ExpiresAt.Sub(o.RequestedAt)))
	s.concluded(hc.p, o)
	s.cancelAsk(ask, "the approval request timed out")
	var lines logBatch // the pumps' batches belong to them
	s.refuseHeld(hc.p, o.Denial, o.Detail, &lines, true)
	hc.p.free()
}

// cancelHeld handles the client's cancellation of a held call: it is
// dropped unforwarded, its reservation released, and the approval request
// withdrawn. It reports whether raw named a held call.
func (s *session) cancelHeld(raw []byte) bool {
	s.mu.Lock()
	var hc *heldCall
	if k, ok := parseRequestID(raw); ok && s.appr.byKey != nil {
		hc = s.appr.byKey[k]
	}
	if hc != nil {
		s.dropLocked(hc)
	}
	s.mu.Unlock()
	if hc == nil {
		return false
	}
	o := &hc.outcome
	o.DecidedAt = time.Now()
	o.refused(VerdictCancelled, gate.ApprovalDeclined, "the client cancelled the call before it was approved")
	s.concluded(hc.p, o)
	s.cancelAsk(o.ID, "the call was cancelled")
	// Cancelled, it gets no answer; it was never forwarded, so it is
	// refused, not charged.
	s.refuseHeld(hc.p, o.Denial, o.Detail, &s.clientLog, false)
	hc.p.free()
	return true
}

// dropHeld ends every held call when the session ends: each is refused
// (with msg, if set, as the reason) and released, never forwarded.
func (s *session) dropHeld(msg string) {
	defer s.dropTrips()
	s.mu.Lock()
	s.appr.closed = true
	var hcs []*heldCall
	for _, hc := range s.appr.byAsk {
		hcs = append(hcs, hc)
	}
	for _, hc := range hcs {
		s.dropLocked(hc)
	}
	s.mu.Unlock()
	var lines logBatch
	for _, hc := range hcs {
		o := &hc.outcome
		o.DecidedAt = time.Now()
		o.refused(VerdictUnavailable, gate.ApprovalUnavailable, "the session ended before the approval was answered")
		s.concluded(hc.p, o)
		if msg != "" {
			s.cancelAsk(o.ID, "the session is ending")
		}
		s.refuseHeld(hc.p, o.Denial, o.Detail, &lines, msg != "")
		hc.p.free()
	}
}

// unhold takes a held call out by its approval request's id; nil if no
// call waits under it.
func (s *session) unhold(ask string) *heldCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	hc := s.appr.byAsk[ask]
	if hc != nil {
		s.dropLocked(hc)
	}
	return hc
}

func (s *session) dropLocked(hc *heldCall) {
	delete(s.appr.byAsk, hc.outcome.ID)
	delete(s.appr.byKey, hc.p.key)
	if hc.timer != nil {
		hc.timer.Stop()
	}
}

// cancelAsk tells the client that an approval request no longer needs an
// answer.
func (s *session) cancelAsk(ask, reason string) {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": ask, "reason": reason}})
	if err == nil {
		s.toClient.write(append(b, '\n'))
	}
}

// forwardHeld sends an approved call to the upstream, exactly as it was
// approved.
func (s *session) forwardHeld(hc *heldCall) {
	p := hc.p
	p.start = time.Now()
	p.approval = &hc.outcome
	if s.evidenceDown() {
		s.refuseHeld(p, gate.EvidenceUnavailable, "approved, but while it waited the audit log could no longer be written, so the call cannot have its receipt; see the proxy's log", &s.clientLog, true)
		p.free()
		return
	}
	cur := s.cfg.Gates.Load()
	den := cur.Gate.StillAuthorized(hc.token, s.proven(hc.token), p.start)
	if den == nil && cur != p.snap {
		// The policy was reloaded while the call waited: the policy in
		// force must still grant it, or a reload that takes a tool away
		// would not stop the calls held for it.
		if p.held == nil {
			den = &gate.Denial{Type: dct.CapabilityNotGranted, Detail: "the policy was reloaded, and the call cannot be checked against the new one; send it again"}
		} else {
			den = cur.Gate.StillGranted(p.held, p.start)
		}
	}
	if den != nil {
		s.refuseHeld(p, den.Type, "approved, but while it waited: "+den.Detail, &s.clientLog, true)
		p.free()
		return
	}
	if why := s.heldPinCheck(p); why != "" {
		s.refuseHeld(p, gate.ToolNotPinned, "approved, but while it waited: "+why, &s.clientLog, true)
		p.free()
		return
	}
	// Only this goroutine adds to the table, so the room checked here is
	// there when the call is put in it.
	s.mu.Lock()
	full := s.pending.len() >= maxPending
	s.mu.Unlock()
	if full {
		s.refuseHeld(p, gate.ApprovalUnavailable, fmt.Sprintf("approved, but more than %d requests are in flight", maxPending), &s.clientLog, true)
		p.free()
		return
	}
	s.decided(p, &p.dec)
	if p.ev.decision != nil {
		p.ev.forwarded = sha256.Sum256(hc.fwd)
	}
	s.mu.Lock()
	s.pending.put(p)
	s.mu.Unlock()
	if err := s.toServer.queue(append(hc.fwd, '\n')); err != nil {
		s.mu.Lock()
		mine := s.pending.get(p.key) == p
		if mine {
			s.pending.remove(p)
		}
		s.mu.Unlock()
		if mine {
			s.settleNow(p, 0, true, outcomeNotForwarded)
			s.replyError(s.toClient, p.id, codeInternalError, "the upstream MCP server is not accepting input", nil)
			p.free()
		}
		return
	}
	s.toServer.flush()
}

// callToken is the token a gated request is decided with: its own, or
// the session's.
func (s *session) callToken(cp *callParams) string {
	d, _ := readDelegateos(cp.delegateos)
	if d.DCT != "" {
		return d.DCT
	}
	return s.sessionToken()
}

// heldPinCheck checks a held call's target against its pin once more
// before it is forwarded: a definition the upstream changed while the
// person was asked is not the one that was pinned. It returns why the
// call may not go, or "".
func (s *session) heldPinCheck(p *pending) string {
	if s.pins == nil {
		return ""
	}
	req := gate.CallRequest{Method: p.method}
	switch p.method {
	case gate.MethodToolsCall:
		req.Tool = p.target
	case gate.MethodPromptsGet:
		req.Prompt = p.target
	default:
		return ""
	}
	return s.pinCheck(&req)
}

// refuseHeld refuses a held call: its reservation is released (it was
// never forwarded, so nothing is charged), its line is written to lb, and
// the client gets the denial if reply is set.
func (s *session) refuseHeld(p *pending, t dct.DenialType, detail string, lb *logBatch, reply bool) {
	d := p.dec
	if p.decision != nil {
		if _, err := s.gateOf(p).Settle(p.decision, 0, true); err != nil {
			s.log.Error("releasing a reservation failed", zap.String("method", p.method), zap.String("target", p.target), zap.Error(err))
		}
		p.decision = nil
	}
	var granted []dct.Capability
	if d.Scope != nil {
		granted = d.Scope.Capabilities
	}
	d.Allowed, d.Reservation = false, nil
	d.Denial = &gate.Denial{Type: t, Detail: detail, Requested: gate.Requested(d.Call), Granted: granted}
	s.decided(p, &d)
	lb.denied(p.method, p.target, &d)
	lb.writeTo(s.log)
	if reply {
		s.replyError(s.toClient, p.id, gate.DenialCode, d.Denial.Message(), d.Denial)
	}
}

// refuseUnasked refuses a held call for which nobody was asked.
func (s *session) refuseUnasked(p *pending, t dct.DenialType, detail string) {
	now := time.Now()
	o := ApprovalOutcome{Method: p.method, Target: p.target, Capability: capabilityText(p.decision), Cost: p.cost(),
		DelegationID: delegationOf(p.decision), RequestedAt: now, DecidedAt: now}
	verdict := VerdictUnavailable
	if t == gate.ApprovalDeclined {
		verdict = VerdictDeclined
	}
	o.refused(verdict, t, detail)
	s.concluded(p, &o)
	s.refuseHeld(p, t, detail, &s.clientLog, true)
	p.free()
}

// concluded records an approval's outcome, whatever it was: its line,
// and with an audit log its human approval receipt, which the decision
// handed over next names.
func (s *session) concluded(p *pending, o *ApprovalOutcome) {
	s.logApproval(o)
	if s.cfg.Evidence == nil {
		return
	}
	b := s.approvalBody(p, o)
	p.ev.auditID, p.ev.approvalID = b.GateAuditID, b.ApprovalID
	digest, err := s.cfg.Evidence.Approval(b)
	if err != nil {
		s.log.Error("writing the human approval receipt failed", zap.String("approval_id", o.ID), zap.Error(err))
		return
	}
	p.ev.approvalHash = digest
}

// logApproval writes an approval's outcome.
func (s *session) logApproval(o *ApprovalOutcome) {
	fields := []zap.Field{
		zap.String("approval_id", o.ID), zap.String("method", o.Method), zap.String("target", o.Target),
		zap.Bool("approved", o.Approved), zap.String("verdict", o.Verdict), zap.String("action", o.Action), zap.String("answerer", o.Answerer),
		zap.String("request_sha256", o.RequestHash), zap.Duration("waited", o.DecidedAt.Sub(o.RequestedAt)),
	}
	if o.ContentHash != "" {
		fields = append(fields, zap.String("content_sha256", o.ContentHash))
	}
	if !o.Approved {
		fields = append(fields, zap.String("denial", string(o.Denial)), zap.String("detail", o.Detail))
	}
	s.log.Info("approval outcome", fields...)
}
