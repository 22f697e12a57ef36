package proxy

import (
	"encoding/json"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/render"
	"time"
)

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
	p.snap = s.cfg.Gates.Load()
	if s.cfg.Tracer != nil {
		s.startSpan(p, &req, cp.meta)
	}
	s.noteArguments(p, req.Arguments)
	d, bad := readDelegateos(cp.delegateos)
	if bad != "" {
		refused := p.snap.Gate.Refuse(req, dct.Malformed, bad)
		return s.refuse(p, &refused)
	}
	if s.evidenceDown() {
		// Refused in observe mode too: nothing is forwarded without its
		// receipt, whatever the policy would decide.
		refused := p.snap.Gate.Refuse(req, gate.EvidenceUnavailable, "the audit log cannot be written, so no request is allowed without its receipt; see the proxy's log")
		spanDecided(p, &refused, true)
		s.decided(p, &refused)
		s.deny(p, &refused)
		return false
	}
	req.Token, req.ContractID, req.DelegationID, req.MaxCost = d.DCT, d.ContractID, d.DelegationID, d.MaxCost
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
	p.dec = p.snap.Gate.DecideAt(&req, p.start)
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
	} else {
		// Kept to be checked again once approved, against the policy
		// then in force (forwardHeld). Its arguments are in the reader's
		// buffer, which the next frame overwrites: they are copied.
		held := req
		held.Arguments = clone(req.Arguments)
		p.held = &held
	}
	// Only this goroutine writes listToken, so it may read it unlocked.
	if session == "" && s.listToken != req.Token {
		s.mu.Lock()
		s.listToken = req.Token
		s.mu.Unlock()
	}
	return true
}

// gateOf is the gate that decided p, or, before p is decided, the gate
// in force now.
func (s *session) gateOf(p *pending) *gate.Gate {
	if p.snap != nil {
		return p.snap.Gate
	}
	return s.cfg.Gates.Load().Gate
}

// deny logs a refused request's line and answers it.
func (s *session) deny(p *pending, d *gate.Decision) {
	s.clientLog.denied(p.method, p.target, d)
	s.clientLog.writeTo(s.log)
	s.replyError(s.toClient, p.id, gate.DenialCode, d.Denial.Message(), d.Denial)
}

// extension reports whether method is a vendor extension method the
// policy's methods list names: gated like tools/call by its rule's
// capability, where any other unknown method is refused.
func (s *session) extension(method string) bool {
	pol := s.cfg.Gates.Load().Gate.Policy
	if pol == nil {
		return false
	}
	_, ok := pol.MapMethod(method)
	return ok
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

// nonEmptyString decodes a JSON string member that must not be empty.
func nonEmptyString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	v, ok := unquote(raw)
	return v, ok && v != ""
}

func hasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
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
