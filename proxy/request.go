package proxy

import (
	"encoding/json"
	"fmt"
	"strconv"

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
	// The edits read p (its traceparent): they are made while p is still
	// this goroutine's alone. Their bytes are not p's (traceEdit makes its
	// own, the number is in s.upText).
	var buf [3]edit
	edits := s.forwardEdits(h, &cp, up, p, &buf)
	if p.ev.decision != nil {
		s.noteForwarded(p, frame, edits)
	}
	s.mu.Lock()
	s.pending.put(p)
	s.mu.Unlock()
	// From here the server's pump may take p (an upstream can guess the
	// number) and free it: p is read only under the lock.
	if err := s.toServer.queueEdited(frame, edits); err != nil {
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

// delegateosParams is params._delegateos (§11.1).
type delegateosParams struct {
	DCT          string `json:"dct"`
	Format       string `json:"format"`
	DelegationID string `json:"delegationId"`
	ContractID   string `json:"contractId"`
	// MaxCost bounds what the call may reserve (gate.CallRequest.MaxCost).
	MaxCost *int64 `json:"maxCostMicrocents"`
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
