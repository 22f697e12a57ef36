package proxy

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/render"
)

// methodRole says what the relay does with a client request.
type methodRole uint8

const (
	// roleUnknown: not a method the relay knows how to gate; refused, so
	// that an upstream's own methods cannot be reached around the gate.
	roleUnknown methodRole = iota
	// roleForward: forwarded without a decision (the lifecycle, ping,
	// logging, unsubscribing, and tasks, whose creating request was gated).
	roleForward
	// roleGate: decided by the gate, and forwarded only if allowed.
	roleGate
	// roleList: forwarded; the result is filtered to the token's view.
	roleList
)

// methodRoles lists every client request method the relay forwards.
var methodRoles = map[string]methodRole{
	"initialize":                     roleForward,
	"server/discover":                roleForward,
	"ping":                           roleForward,
	"logging/setLevel":               roleForward,
	"resources/unsubscribe":          roleForward,
	"tasks/get":                      roleForward,
	"tasks/result":                   roleForward,
	"tasks/list":                     roleForward,
	"tasks/cancel":                   roleForward,
	gate.MethodToolsCall:             roleGate,
	gate.MethodResourcesRead:         roleGate,
	gate.MethodResourcesSubscribe:    roleGate,
	gate.MethodPromptsGet:            roleGate,
	gate.MethodCompletionComplete:    roleGate,
	gate.MethodSubscriptionsListen:   roleGate,
	gate.MethodToolsList:             roleList,
	gate.MethodResourcesList:         roleList,
	gate.MethodResourceTemplatesList: roleList,
	gate.MethodPromptsList:           roleList,
}

// clientNotifications are the notifications a client may send (MCP up to
// 2026-07-28); the relay forwards no other.
var clientNotifications = map[string]bool{
	"notifications/initialized":        true,
	"notifications/cancelled":          true,
	"notifications/progress":           true,
	"notifications/roots/list_changed": true,
	"notifications/tasks/status":       true,
}

// roleOf is the relay's role for a client request method.
func roleOf(method string) methodRole {
	switch method { // the common ones without a map lookup
	case gate.MethodToolsCall:
		return roleGate
	case gate.MethodToolsList:
		return roleList
	case "ping":
		return roleForward
	}
	return methodRoles[method]
}

// delegateosParams is params._delegateos (§11.1).
type delegateosParams struct {
	DCT          string `json:"dct"`
	Format       string `json:"format"`
	DelegationID string `json:"delegationId"`
	ContractID   string `json:"contractId"`
}

// readDelegateos reads params._delegateos; an empty raw is none.
func readDelegateos(raw []byte) (delegateosParams, string) {
	if raw == nil {
		return delegateosParams{}, ""
	}
	return decodeDelegateos(raw)
}

// decodeDelegateos is readDelegateos for a member that is there; apart, so
// that a request without one costs no allocation.
//
//go:noinline
func decodeDelegateos(raw []byte) (delegateosParams, string) {
	var d delegateosParams
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, "params._delegateos is not an object with a dct string"
	}
	if d.Format != "" && d.Format != dct.Format {
		return d, fmt.Sprintf("unknown token format %q", d.Format)
	}
	return d, ""
}

// clientRequest handles a request from the client outside the proxy's
// own namespace: it is refused, decided, or forwarded with the id the
// relay numbers it by and without _delegateos.
func (s *session) clientRequest(h header, frame []byte) {
	key, ok := parseRequestID(h.id)
	if !ok {
		s.replyError(s.toClient, nil, codeInvalidRequest, "invalid request id: use a string of at most 256 bytes or an integer within ±2^53", nil)
		return
	}
	role := roleOf(h.method)
	if role == roleUnknown && s.extension(h.method) {
		role = roleGate
	}
	if role == roleUnknown {
		s.log.Warn("client request refused", zap.String("method", h.method), zap.String("reason", "unknown method"))
		s.replyError(s.toClient, h.id, codeMethodNotFound, "method not found: "+render.Name(h.method)+" is not an MCP method this proxy can gate, so it is not forwarded", nil)
		return
	}
	if h.method == "initialize" {
		s.clientCapabilities(h.params)
	}
	s.mu.Lock()
	dup := s.pending.get(key) != nil || len(s.appr.byKey) > 0 && s.appr.byKey[key] != nil
	full := s.pending.len() >= maxPending
	s.mu.Unlock()
	if dup {
		s.replyError(s.toClient, h.id, codeInvalidRequest, "a request with this id is already in flight", nil)
		return
	}
	if full {
		s.replyError(s.toClient, h.id, codeInvalidRequest, fmt.Sprintf("more than %d requests in flight", maxPending), nil)
		return
	}
	var cp callParams
	if h.params != nil {
		var err error
		if cp, err = readCallParams(h.params); err != nil {
			s.replyError(s.toClient, h.id, codeInvalidRequest, "invalid request: "+h.method+" "+err.Error(), nil)
			return
		}
	} else if role == roleGate && roleOf(h.method) == roleGate {
		// (A vendor method may take none.)
		s.replyError(s.toClient, h.id, codeInvalidRequest, "invalid request: "+h.method+" needs params", nil)
		return
	}
	p := newPending(key, h.id, h.method)
	switch role {
	case roleGate:
		s.notePayload(p, frame)
		if !s.gate(p, &cp, h.params) {
			p.free()
			return
		}
		if p.span != nil {
			s.spanForward(p, h.method)
		}
		if s.needsApproval(p) && s.hold(p, h, &cp, frame) {
			return
		}
	case roleList:
		d, bad := readDelegateos(cp.delegateos)
		if bad != "" {
			s.replyError(s.toClient, h.id, codeInvalidRequest, "invalid request: "+bad, nil)
			p.free()
			return
		}
		p.listToken = d.DCT
	}
	s.upSeq++
	up := s.upSeq
	p.up = up
	if p.ev.decision != nil {
		var buf [3]edit
		s.noteForwarded(p, frame, s.forwardEdits(h, &cp, up, p, &buf))
	}
	s.mu.Lock()
	s.pending.put(p)
	s.mu.Unlock()
	// From here the server's pump may take p (an upstream can guess the
	// number): p is read only under the lock.
	if err := s.forward(frame, h, &cp, up, p); err != nil {
		// The upstream may already have answered a request it guessed the
		// id of, so the call is settled only if it is still pending.
		s.mu.Lock()
		mine := s.pending.get(key) == p
		if mine {
			s.pending.remove(p)
		}
		s.mu.Unlock()
		if mine {
			s.settleNow(p, 0, true, outcomeNotForwarded)
			s.replyError(s.toClient, p.id, codeInternalError, "the upstream MCP server is not accepting input", nil)
			p.free()
		}
	}
}

// forward queues a client request or notification for the upstream, with
// its id replaced by up (when up is not 0), params._delegateos cut out and,
// when p is traced, its upstream span's traceparent in params._meta.
func (s *session) forward(frame []byte, h header, cp *callParams, up int64, p *pending) error {
	var edits [3]edit
	return s.toServer.queueEdited(frame, s.forwardEdits(h, cp, up, p, &edits))
}

// forwardEdits are forward's edits, made in buf. An insertion comes
// before the cut that may start where it is made (edits are applied in
// order of where they start, ties as given).
func (s *session) forwardEdits(h header, cp *callParams, up int64, p *pending, buf *[3]edit) []edit {
	n := 0
	if e, ok := traceEdit(p, h, cp); ok {
		buf[n] = e
		n++
	}
	if up != 0 {
		buf[n] = edit{from: h.idAt, to: h.idAt + len(h.id), with: strconv.AppendInt(s.upText[:0], up, 10)}
		n++
	}
	if cp.strip {
		buf[n] = edit{from: h.paramsAt + cp.stripFrom, to: h.paramsAt + cp.stripTo}
		n++
	}
	return buf[:n]
}

// forwardedParams are params as they are forwarded (_delegateos cut out,
// see forwardEdits), for a receipt; nil for none.
func forwardedParams(params []byte, cp *callParams) []byte {
	if params == nil || !cp.strip {
		return params
	}
	out := make([]byte, 0, len(params)-(cp.stripTo-cp.stripFrom))
	return append(append(out, params[:cp.stripFrom]...), params[cp.stripTo:]...)
}

// gate decides a gated request, and answers it when it is refused. It
// reports whether the request may be forwarded; if so p holds the decision
// to settle, unless observe mode forwards a refusal (see refuse).
func (s *session) gate(p *pending, cp *callParams, params []byte) bool {
	if cp.variant != "" && roleOf(p.method) == roleGate {
		s.replyError(s.toClient, p.id, codeInvalidRequest, "invalid request: "+p.method+" params."+render.Name(cp.variant)+" differs from a member the gate reads only in letter case; spell it exactly", nil)
		return false
	}
	req := gate.CallRequest{Method: p.method}
	switch p.method {
	case gate.MethodToolsCall:
		tool, ok := s.toolName(cp.name)
		if !ok {
			s.replyError(s.toClient, p.id, codeInvalidRequest, "invalid request: tools/call params.name must be a non-empty string", nil)
			return false
		}
		req.Tool, req.Arguments = tool, cp.arguments
	case gate.MethodPromptsGet:
		name, ok := nonEmptyString(cp.name)
		if !ok {
			s.replyError(s.toClient, p.id, codeInvalidRequest, "invalid request: prompts/get params.name must be a non-empty string", nil)
			return false
		}
		req.Prompt, req.Arguments = name, cp.arguments
	case gate.MethodResourcesRead, gate.MethodResourcesSubscribe:
		uri, ok := nonEmptyString(cp.uri)
		if !ok {
			s.replyError(s.toClient, p.id, codeInvalidRequest, "invalid request: "+p.method+" params.uri must be a non-empty string", nil)
			return false
		}
		req.URI = uri
	case gate.MethodCompletionComplete:
		if msg := completionRef(cp.ref, &req); msg != "" {
			s.replyError(s.toClient, p.id, codeInvalidRequest, "invalid request: "+msg, nil)
			return false
		}
		// The argument it completes (and any context) goes upstream:
		// the receipt's arguments are the params as forwarded.
		req.Arguments = forwardedParams(params, cp)
	case gate.MethodSubscriptionsListen:
		uris, msg := resourceSubscriptions(cp.notifications)
		if msg != "" {
			s.replyError(s.toClient, p.id, codeInvalidRequest, "invalid request: "+msg, nil)
			return false
		}
		if len(uris) == 0 {
			// Only list-changed notifications: nothing to gate.
			return true
		}
		req.URIs = uris
	default:
		// A vendor extension method the policy lists (clientRequest
		// checked): its rule gives the capability.
		req.Extension = true
		// What the upstream acts on is the params, not the rule's fixed
		// resource: the receipt's arguments are the params as forwarded.
		req.Arguments = forwardedParams(params, cp)
	}
	p.target = req.Target()
	if s.cfg.Tracer != nil {
		s.startSpan(p, &req, cp.meta)
	}
	s.noteArguments(p, req.Arguments)
	d, bad := readDelegateos(cp.delegateos)
	if bad != "" {
		refused := s.cfg.Gate.Refuse(req, dct.Malformed, bad)
		return s.refuse(p, &refused)
	}
	if s.evidenceDown() {
		// Refused in observe mode too: nothing is forwarded without its
		// receipt, whatever the policy would decide.
		refused := s.cfg.Gate.Refuse(req, gate.EvidenceUnavailable, "the audit log cannot be written, so no request is allowed without its receipt; see the proxy's log")
		spanDecided(p, &refused, true)
		s.decided(p, &refused)
		s.deny(p, &refused)
		return false
	}
	req.Token, req.ContractID, req.DelegationID = d.DCT, d.ContractID, d.DelegationID
	session := s.sessionToken()
	if req.Token == "" {
		req.Token = session
	}
	req.Proven = s.proven(req.Token)
	if s.pins != nil {
		req.Unpinned = s.pinCheck(&req)
	}
	p.ev.token = req.Token
	p.start = time.Now()
	p.dec = s.cfg.Gate.DecideAt(&req, p.start)
	if !p.dec.Allowed {
		return s.refuse(p, &p.dec)
	}
	spanDecided(p, &p.dec, true)
	// An allowed call's line is written when it settles, with what it
	// cost and how it ended.
	p.decision = &p.dec
	if !s.awaitsApproval(p) {
		// A call held for approval is handed over once the approval
		// ends, naming its receipt.
		s.decided(p, &p.dec)
	}
	// Only this goroutine writes listToken, so it may read it unlocked.
	if session == "" && s.listToken != req.Token {
		s.mu.Lock()
		s.listToken = req.Token
		s.mu.Unlock()
	}
	return true
}

// extension reports whether method is a vendor extension method the
// policy's methods list names: gated like tools/call by its rule's
// capability, where any other unknown method is refused.
func (s *session) extension(method string) bool {
	if s.cfg.Gate == nil || s.cfg.Gate.Policy == nil {
		return false
	}
	_, ok := s.cfg.Gate.Policy.MapMethod(method)
	return ok
}

// completionRef reads completion/complete's params.ref strictly: a
// ref/prompt names a prompt, a ref/resource a resource URI (or URI
// template). It returns what is wrong, or "".
func completionRef(raw []byte, req *gate.CallRequest) string {
	if raw == nil {
		return "completion/complete params.ref must be an object"
	}
	ref, err := readCallParams(raw)
	if err != nil {
		return "completion/complete params.ref: " + err.Error()
	}
	if ref.variant != "" {
		return "completion/complete params.ref." + render.Name(ref.variant) + " differs from a member the gate reads only in letter case; spell it exactly"
	}
	typ, _ := nonEmptyString(ref.typ)
	switch typ {
	case "ref/prompt":
		name, ok := nonEmptyString(ref.name)
		if !ok {
			return "completion/complete params.ref.name must be a non-empty string"
		}
		req.Prompt = name
	case "ref/resource":
		uri, ok := nonEmptyString(ref.uri)
		if !ok {
			return "completion/complete params.ref.uri must be a non-empty string"
		}
		req.URI = uri
	default:
		return `completion/complete params.ref.type must be "ref/prompt" or "ref/resource"`
	}
	return ""
}

// resourceSubscriptions reads subscriptions/listen's
// params.notifications.resourceSubscriptions (MCP 2026-07-28): the URIs
// whose updates the client asks for, each of which must be readable.
func resourceSubscriptions(raw []byte) ([]string, string) {
	if raw == nil {
		return nil, ""
	}
	n, err := readCallParams(raw)
	if err != nil {
		return nil, "subscriptions/listen params.notifications: " + err.Error()
	}
	if n.variant != "" {
		return nil, "subscriptions/listen params.notifications." + render.Name(n.variant) + " differs from a member the gate reads only in letter case; spell it exactly"
	}
	if n.resourceSubscriptions == nil || string(n.resourceSubscriptions) == "null" {
		return nil, ""
	}
	var uris []string
	if json.Unmarshal(n.resourceSubscriptions, &uris) != nil {
		return nil, "subscriptions/listen params.notifications.resourceSubscriptions must be an array of strings"
	}
	for _, u := range uris {
		if u == "" {
			return nil, "subscriptions/listen params.notifications.resourceSubscriptions holds an empty URI"
		}
	}
	return uris, ""
}

// nonEmptyString decodes a JSON string member that must not be empty.
func nonEmptyString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	v, ok := unquote(raw)
	return v, ok && v != ""
}

// toolName decodes params.name. The previous call's decoded name is
// reused when this one is written the same way without escapes, so the
// name the gate decides is always the decoded string, however it is
// spelt (only the client's goroutine calls it).
func (s *session) toolName(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if v := raw[1 : len(raw)-1]; s.lastTool != "" && string(v) == s.lastTool && !hasEscape(v) {
		return s.lastTool, true
	}
	tool, ok := unquote(raw)
	if !ok || tool == "" {
		return "", false
	}
	s.lastTool = tool
	return tool, true
}

func hasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// deny logs a refused request's line and answers it.
func (s *session) deny(p *pending, d *gate.Decision) {
	s.clientLog.denied(p.method, p.target, d)
	s.clientLog.writeTo(s.log)
	s.replyError(s.toClient, p.id, gate.DenialCode, d.Denial.Message(), d.Denial)
}

// clientNotification handles a notification from the client: a
// cancellation is matched to the request it cancels, and every
// notification is forwarded without _delegateos.
func (s *session) clientNotification(h header, frame []byte) {
	switch h.method {
	case gate.MethodToolsCall, gate.MethodResourcesRead, gate.MethodResourcesSubscribe, gate.MethodPromptsGet, gate.MethodCompletionComplete, gate.MethodSubscriptionsListen:
		// A request without an id cannot be answered, so it cannot be
		// refused either: it is not forwarded.
		s.log.Warn("client frame refused", zap.String("reason", h.method+" sent as a notification"))
		return
	}
	if !clientNotifications[h.method] {
		// An upstream's own notification handlers are not reached around
		// the gate either.
		s.log.Warn("client notification dropped", zap.String("method", h.method), zap.String("reason", "not an MCP notification a client sends"))
		return
	}
	var cp callParams
	if h.params != nil {
		var err error
		if cp, err = readCallParams(h.params); err != nil {
			s.log.Warn("client notification dropped", zap.String("method", h.method), zap.String("reason", err.Error()))
			return
		}
	}
	if h.method == "notifications/cancelled" {
		s.cancelled(h, frame, &cp)
		return
	}
	if err := s.forward(frame, h, &cp, 0, nil); err != nil {
		s.log.Warn("forwarding a notification failed", zap.String("method", h.method), zap.Error(err))
	}
}

// cancelled handles the client's notifications/cancelled: the request it
// names leaves the table at once (its slot and its id are free again), a
// gated call that was forwarded is charged what it reserved (the upstream
// may have done the work), and the upstream is told, under the id it
// knows the request by. An answer it sends anyway names an id no request
// holds any more, and is dropped.
func (s *session) cancelled(h header, frame []byte, cp *callParams) {
	if cp.variant != "" {
		s.log.Warn("client notification dropped", zap.String("method", h.method), zap.String("reason", "params."+cp.variant+" differs from a member the gate reads only in letter case"))
		return
	}
	if cp.requestID == nil {
		s.log.Warn("client notification dropped", zap.String("method", h.method), zap.String("reason", "params.requestId is missing"))
		return
	}
	s.mu.Lock()
	p := s.pending.lookup(cp.requestID)
	if p != nil {
		s.pending.remove(p)
	}
	s.mu.Unlock()
	if p == nil {
		// Answered already, never sent, held for approval (then it is
		// dropped unforwarded), or not the client's to cancel.
		s.cancelHeld(cp.requestID)
		return
	}
	s.log.Info("client cancelled a request", zap.String("method", p.method), zap.String("target", p.target))
	s.settleNow(p, p.cost(), false, outcomeCancelled)
	var edits [2]edit
	n := 0
	// requestId sits inside params: its offset is found by reading params
	// again, which only a cancellation costs.
	if at := memberOffset(h.params, cp.requestID); at >= 0 {
		edits[n] = edit{from: h.paramsAt + at, to: h.paramsAt + at + len(cp.requestID), with: strconv.AppendInt(s.upText[:0], p.up, 10)}
		n++
	}
	if cp.strip {
		edits[n] = edit{from: h.paramsAt + cp.stripFrom, to: h.paramsAt + cp.stripTo}
		n++
	}
	if n > 1 && edits[1].from < edits[0].from {
		edits[0], edits[1] = edits[1], edits[0]
	}
	p.free()
	if err := s.toServer.queueEdited(frame, edits[:n]); err != nil {
		s.log.Warn("forwarding a cancellation failed", zap.Error(err))
	}
}

// memberOffset is where v, a subslice of b, starts in b; -1 if it is not one.
func memberOffset(b, v []byte) int {
	if len(v) == 0 || cap(v) > cap(b) {
		return -1
	}
	at := cap(b) - cap(v)
	if at < 0 || at+len(v) > len(b) || &b[at] != &v[0] {
		return -1
	}
	return at
}
