package proxy

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/internal/strictjson"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/receipt"
)

// MethodElicitationCreate is the request the proxy sends the client to
// ask for an approval.
const MethodElicitationCreate = "elicitation/create"

// approvalIDPrefix starts the id of every request the proxy sends the
// client to ask for an approval; a random part per session follows, so
// that no upstream can send a request under an id the proxy's answers
// are matched by.
const approvalIDPrefix = "delegateos-approval-"

// maxHeld bounds the calls held for approval at once: each one is a form
// a person has to answer.
const maxHeld = 16

// maxArgumentsShown bounds the arguments summary in an approval request.
const maxArgumentsShown = 512

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

// clientCapabilities reads the initialize request's params as it passes
// to the upstream: whether the client declared the elicitation capability
// with form mode (an empty object declares form mode), and its
// clientInfo. Params that could be read two ways declare nothing.
func (s *session) clientCapabilities(params []byte) {
	elicit, answerer := readClientCapabilities(params)
	s.mu.Lock()
	s.appr.elicit, s.appr.answerer = elicit, answerer
	s.mu.Unlock()
}

func readClientCapabilities(params []byte) (elicit bool, answerer string) {
	if params == nil || strictjson.Check(params) != nil {
		return false, ""
	}
	var p struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
		ClientInfo   map[string]json.RawMessage `json:"clientInfo"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false, ""
	}
	var name, version string
	_ = json.Unmarshal(p.ClientInfo["name"], &name)
	_ = json.Unmarshal(p.ClientInfo["version"], &version)
	answerer = clip(name, 128)
	if version != "" {
		answerer += "/" + clip(version, 64)
	}
	var modes map[string]json.RawMessage
	if raw, ok := p.Capabilities["elicitation"]; !ok || json.Unmarshal(raw, &modes) != nil || modes == nil {
		return false, answerer
	}
	form, hasForm := modes["form"]
	_, hasURL := modes["url"]
	switch {
	case hasForm:
		return len(form) > 0 && form[0] == '{', answerer
	case hasURL:
		return false, answerer // URL mode only
	}
	return true, answerer
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// needsApproval reports whether an allowed call waits for approval: a
// tools/call, prompts/get or resources/read whose rule asks for it.
func (s *session) needsApproval(p *pending) bool {
	if p.decision == nil {
		return false
	}
	a, ok := s.cfg.Gate.Approval(p.method, p.decision.Call.Rule)
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
	if m, modern, bad := readModernParams(h.params); bad != "" {
		s.refuseUnasked(p, gate.ApprovalUnavailable, "the request cannot be read for its approval: "+bad)
		return true
	} else if modern {
		s.holdModern(p, h, cp, frame, m)
		return true
	}
	now := time.Now()
	ap, _ := s.cfg.Gate.Approval(p.method, p.decision.Call.Rule)
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

// forwardBytes is the frame as forward would queue it.
func (s *session) forwardBytes(frame []byte, h header, cp *callParams, up int64, p *pending) []byte {
	var buf [3]edit
	edits := sortedEdits(s.forwardEdits(h, cp, up, p, &buf))
	out := make([]byte, 0, len(frame)+1)
	at := 0
	for _, e := range edits {
		out = append(out, frame[at:e.from]...)
		out = append(out, e.with...)
		at = e.to
	}
	return append(out, frame[at:]...)
}

// capabilityText writes what a decision's call requested.
func capabilityText(d *gate.Decision) string {
	c := d.Call
	if c.Namespace == "" {
		return ""
	}
	return c.Namespace + ":" + c.Action + ":" + c.Resource
}

// delegationOf is the delegation of a decision's token, or "".
func delegationOf(d *gate.Decision) string {
	if d.Scope == nil {
		return ""
	}
	return d.Scope.DelegationID
}

// what names a pending request's target for people.
func (p *pending) what() string {
	switch p.method {
	case gate.MethodToolsCall:
		return "tool " + render.Name(p.target)
	case gate.MethodPromptsGet:
		return "prompt " + render.Name(p.target)
	}
	return p.method + " of " + render.Name(p.target)
}

// approvalSchema is the form the client shows: one required checkbox, so
// that submitting the form is not taken for approval unless it is ticked.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve this call","description":"Tick to let the call run; leave unticked, decline or cancel to refuse it.","default":false}},"required":["approve"]}`)

// approvalRequest is the elicitation/create request asking for hc's
// approval.
func approvalRequest(ask string, hc *heldCall, arguments []byte) ([]byte, error) {
	msg := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", ask, MethodElicitationCreate, approvalParams(&hc.outcome, hc.p, arguments)}
	out, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// approvalParams are the params of the elicitation/create asking for an
// approval: the message names the target, a bounded summary of the
// arguments, the cost and the delegation, all made printable.
func approvalParams(o *ApprovalOutcome, p *pending, arguments []byte) map[string]any {
	var b strings.Builder
	fmt.Fprintf(&b, "delegateos: approve %s", render.Escaped(p.what()))
	if o.Capability != "" {
		fmt.Fprintf(&b, " (capability %s)", render.Escaped(o.Capability))
	}
	b.WriteString("?\n")
	if summary := argumentsSummary(arguments); summary != "" {
		fmt.Fprintf(&b, "Arguments: %s\n", summary)
	}
	fmt.Fprintf(&b, "Cost: %d microcents\n", o.Cost)
	if o.DelegationID != "" {
		fmt.Fprintf(&b, "Delegation: %s\n", render.Escaped(o.DelegationID))
	} else {
		b.WriteString("Delegation: none (unauthenticated call)\n")
	}
	fmt.Fprintf(&b, "Request SHA-256: %s\nExpires: %s", o.RequestHash, o.ExpiresAt.UTC().Format(time.RFC3339))
	return map[string]any{
		"message":         b.String(),
		"requestedSchema": approvalSchema,
		"_meta": map[string]any{"delegateos/approval": map[string]any{
			"method": o.Method, "target": o.Target, "capability": o.Capability, "costMicrocents": o.Cost,
			"delegationId": o.DelegationID, "requestSha256": o.RequestHash, "expiresAt": o.ExpiresAt.UTC().Format(time.RFC3339),
		}},
	}
}

// argumentsSummary is the arguments as compact JSON, at most
// maxArgumentsShown bytes of it, with what a terminal or chat window would
// act on escaped; "" when there are none.
func argumentsSummary(arguments []byte) string {
	if len(arguments) == 0 || string(arguments) == "null" {
		return ""
	}
	var compact bytes.Buffer
	if json.Compact(&compact, arguments) != nil {
		compact.Reset()
		compact.Write(arguments)
	}
	s := compact.String()
	more := len(s) > maxArgumentsShown
	s = render.Escaped(clip(s, maxArgumentsShown))
	if more {
		s += fmt.Sprintf(" (%d bytes in all)", compact.Len())
	}
	return s
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

// judge records the answer read (or what was wrong with it) in o.
func (o *ApprovalOutcome) judge(result approvalResult, bad string) {
	if bad != "" {
		o.refused(VerdictUnavailable, gate.ApprovalUnavailable, bad)
		return
	}
	sum := sha256.Sum256(result.raw)
	o.ContentHash, o.Action = hex.EncodeToString(sum[:]), result.action
	switch {
	case result.action == "accept" && result.approve:
		o.Approved, o.Verdict = true, VerdictApproved
	case result.action == "accept":
		o.refused(VerdictDeclined, gate.ApprovalDeclined, "the approval form was submitted without approve ticked")
	case result.action == "decline":
		o.refused(VerdictDeclined, gate.ApprovalDeclined, "the approval was declined")
	case result.action == "cancel":
		o.refused(VerdictCancelled, gate.ApprovalDeclined, "the approval was cancelled")
	default:
		o.refused(VerdictUnavailable, gate.ApprovalUnavailable, "the client answered the approval request with action "+render.Name(clip(result.action, 64)))
	}
}

// approvalID decodes a response id and reports whether it is under the
// proxy's approval prefix.
func (s *session) approvalID(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	id, ok := parseRequestID(raw)
	if !ok || !strings.HasPrefix(id.str, approvalIDPrefix) {
		return "", false
	}
	return id.str, true
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

type approvalResult struct {
	raw     []byte
	action  string
	approve bool
}

// readApprovalAnswer reads the client's response strictly: a result with
// an action string, and for accept a content object whose approve is
// true. It returns what is wrong with it, or "".
func readApprovalAnswer(frame []byte) (approvalResult, string) {
	var r approvalResult
	if strictjson.Check(frame) != nil {
		return r, "the client's answer to the approval request could be read two ways"
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(frame, &msg) != nil {
		return r, "the client's answer to the approval request is not a JSON object"
	}
	if e, ok := msg["error"]; ok {
		var body struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(e, &body)
		return r, "the client answered the approval request with an error: " + render.Escaped(clip(body.Message, 200))
	}
	raw, ok := msg["result"]
	if !ok {
		return r, "the client's answer to the approval request has no result"
	}
	return readApprovalResult(raw)
}

// readApprovalResult reads an elicitation result: an object with an
// action string, and for accept a content object whose approve is true.
func readApprovalResult(raw []byte) (approvalResult, string) {
	var r approvalResult
	var res map[string]json.RawMessage
	if json.Unmarshal(raw, &res) != nil || res == nil {
		return r, "the client's answer to the approval request has a result that is not an object"
	}
	r.raw = raw
	if k := caseVariantOf(res, "action", "content"); k != "" {
		return r, "the client's answer to the approval request has a member " + render.Name(clip(k, 64)) + " that differs from action or content only in letter case"
	}
	if json.Unmarshal(res["action"], &r.action) != nil || r.action == "" {
		return r, "the client's answer to the approval request has no action"
	}
	if r.action == "accept" {
		var content map[string]json.RawMessage
		var approve bool
		if json.Unmarshal(res["content"], &content) == nil && json.Unmarshal(content["approve"], &approve) == nil {
			r.approve = approve && caseVariantOf(content, "approve") == ""
		}
	}
	return r, ""
}

// caseVariantOf returns a member of m whose name differs from one of
// names only in letter case, or "": readers that match names
// case-insensitively could take it for that one.
func caseVariantOf(m map[string]json.RawMessage, names ...string) string {
	for k := range m {
		for _, n := range names {
			if k != n && strings.EqualFold(k, n) {
				return k
			}
		}
	}
	return ""
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
	if den := s.cfg.Gate.StillAuthorized(hc.token, s.proven(hc.token), p.start); den != nil {
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

// cancelAsk tells the client that an approval request no longer needs an
// answer.
func (s *session) cancelAsk(ask, reason string) {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": ask, "reason": reason}})
	if err == nil {
		s.toClient.write(append(b, '\n'))
	}
}

// refuseHeld refuses a held call: its reservation is released (it was
// never forwarded, so nothing is charged), its line is written to lb, and
// the client gets the denial if reply is set.
func (s *session) refuseHeld(p *pending, t dct.DenialType, detail string, lb *logBatch, reply bool) {
	d := p.dec
	if p.decision != nil {
		if _, err := s.cfg.Gate.Settle(p.decision, 0, true); err != nil {
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
	if a, rule, ok := s.cfg.Gate.ApprovalRule(p.method, p.dec.Call.Rule); ok {
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

// forgedApprovalID reports whether an upstream request uses an id under
// the proxy's approval prefix: the client's answer to it would be taken
// for an approval, so it is refused.
func (s *session) forgedApprovalID(raw []byte) bool {
	_, ours := s.approvalID(raw)
	return ours
}

// approvalTooLarge handles a client response over the frame limit whose
// id is under the proxy's approval prefix: the call it answers, if any, is
// refused, and nothing reaches the upstream. It reports whether the id
// was the proxy's.
func (s *session) approvalTooLarge(id []byte, msg string) bool {
	ask, ours := s.approvalID(id)
	if !ours {
		return false
	}
	hc := s.unhold(ask)
	if hc == nil {
		return true
	}
	o := &hc.outcome
	o.DecidedAt = time.Now()
	o.refused(VerdictUnavailable, gate.ApprovalUnavailable, "the client's answer to the approval request "+msg)
	s.concluded(hc.p, o)
	s.refuseHeld(hc.p, o.Denial, o.Detail, &s.clientLog, true)
	hc.p.free()
	return true
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
