package proxy

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/internal/strictjson"
	"github.com/delegateos/delegateos/receipt"
)

// MCP 2026-07-28 has no initialize and no requests from server to client:
// a client declares its capabilities in each request's _meta, and a server
// that needs the user's input answers the request with an input_required
// result; the client asks the user and sends the request again with the
// answers (inputResponses) and the server's requestState. A held call of
// such a client is asked for that way.
const (
	// metaClientCapabilities and metaClientInfo are the _meta members in
	// which a 2026-07-28 client declares itself with each request.
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	// approvalInputKey names the proxy's input request in inputRequests
	// and the answer to it in inputResponses.
	approvalInputKey = "delegateos/approval"
	// approvalStatePrefix starts the requestState of the proxy's input
	// requests; a random part follows.
	approvalStatePrefix = "delegateos-approval-state-"
)

// roundTrip is an approval asked for with an input_required result,
// waiting for the request to come back with the answer.
type roundTrip struct {
	// digest is what the retry must match: method, target, arguments and
	// token.
	digest [32]byte
	// fwd is the first request exactly as it is forwarded if approved
	// (under the upstream number chosen when it was asked for): the retry
	// itself is not forwarded, so the members it adds reach no upstream.
	fwd     []byte
	up      int64
	outcome ApprovalOutcome
	// asked is what the approval receipt of a call never sent back needs
	// of the first request (method, target, scope, rule), and auditID its
	// WAITING decision's audit_id, which that receipt names.
	asked   pending
	auditID string
}

// modernParams is what a request's params say about a 2026-07-28
// client's approval: its capabilities and the answer it brings back.
type modernParams struct {
	elicit   bool
	answerer string
	// state is requestState; answer is inputResponses[approvalInputKey].
	state  string
	answer json.RawMessage
}

// readModernParams reads params as a 2026-07-28 request: ok is false when
// they declare no client capabilities in _meta and bring back no
// requestState (then the client is one that sent initialize). Params that
// could be read two ways are refused (bad).
func readModernParams(params []byte) (m modernParams, ok bool, bad string) {
	if params == nil || !bytes.Contains(params, []byte("requestState")) && !bytes.Contains(params, []byte("clientCapabilities")) {
		// Either name may be spelt with escapes: then the request is read
		// as a client's that sent initialize, which asks or refuses.
		return m, false, ""
	}
	if strictjson.Check(params) != nil {
		return m, false, "params could be read two ways"
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return m, false, "params are not an object"
	}
	if k := caseVariantOf(p, "requestState", "inputResponses", "_meta"); k != "" {
		return m, false, "params." + render.Name(clip(k, 64)) + " differs from a member the proxy reads only in letter case"
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(p["_meta"], &meta)
	caps, declared := meta[metaClientCapabilities]
	state, hasState := p["requestState"]
	if !declared && !hasState {
		return m, false, ""
	}
	if hasState && json.Unmarshal(state, &m.state) != nil {
		return m, false, "params.requestState is not a string"
	}
	var responses map[string]json.RawMessage
	_ = json.Unmarshal(p["inputResponses"], &responses)
	m.answer = responses[approvalInputKey]
	if declared {
		declaration := map[string]json.RawMessage{"capabilities": caps, "clientInfo": orNull(meta[metaClientInfo])}
		if b, err := json.Marshal(declaration); err == nil {
			m.elicit, m.answerer = readClientCapabilities(b)
		}
	}
	return m, true, ""
}

func orNull(raw []byte) []byte {
	if raw == nil {
		return []byte("null")
	}
	return raw
}

// holdModern asks a 2026-07-28 client for a held call's approval, or,
// when the call comes back with the answer, forwards the call that was
// asked for or refuses it.
func (s *session) holdModern(p *pending, h header, cp *callParams, frame []byte, m modernParams) {
	digest := s.requestDigest(p, cp)
	if strings.HasPrefix(m.state, approvalStatePrefix) {
		s.approvalRetry(p, m, digest, s.callToken(cp))
		return
	}
	if !m.elicit {
		s.refuseUnasked(p, gate.ApprovalUnavailable, "the client did not declare the elicitation capability (form mode) in the request's _meta, so no one can be asked to approve "+p.what())
		return
	}
	now := time.Now()
	ap, _ := s.gateOf(p).Approval(p.method, p.decision.Call.Rule)
	s.mu.Lock()
	a := &s.appr
	if a.trips == nil {
		a.trips = map[string]*roundTrip{}
	}
	var expired []*roundTrip
	for k, t := range a.trips {
		if now.After(t.outcome.ExpiresAt) {
			delete(a.trips, k)
			expired = append(expired, t)
		}
	}
	full := len(a.trips) >= maxHeld
	s.mu.Unlock()
	for _, t := range expired {
		s.abandoned(t, VerdictTimeout, "the call was not sent back with the answer within "+t.outcome.ExpiresAt.Sub(t.outcome.RequestedAt).String(), t.outcome.ExpiresAt)
	}
	if full {
		s.refuseUnasked(p, gate.ApprovalUnavailable, "16 approvals are already waiting for an answer")
		return
	}
	var r [16]byte
	_, _ = rand.Read(r[:])
	state := approvalStatePrefix + hex.EncodeToString(r[:])
	s.upSeq++
	fwd := s.forwardBytes(frame, h, cp, s.upSeq, p)
	sum := sha256.Sum256(fwd)
	t := &roundTrip{digest: digest, fwd: fwd, up: s.upSeq,
		asked: pending{method: p.method, target: p.target, snap: p.snap, dec: gate.Decision{Scope: p.dec.Scope, Call: p.dec.Call}}}
	t.outcome = ApprovalOutcome{
		ID: state, Method: p.method, Target: p.target, Capability: capabilityText(p.decision),
		Cost: p.cost(), DelegationID: delegationOf(p.decision), RequestHash: hex.EncodeToString(sum[:]),
		Answerer: m.answerer, RequestedAt: now, ExpiresAt: now.Add(ap.Wait()),
	}
	result := map[string]any{
		"resultType": "input_required",
		"inputRequests": map[string]any{approvalInputKey: map[string]any{
			"method": MethodElicitationCreate, "params": approvalParams(&t.outcome, p, cp.arguments),
		}},
		"requestState": state,
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(p.id), "result": result})
	if err != nil {
		s.refuseUnasked(p, gate.ApprovalUnavailable, "the approval request cannot be written: "+err.Error())
		return
	}
	s.mu.Lock()
	a.trips[state] = t
	s.mu.Unlock()
	s.log.Info("approval asked", zap.String("method", p.method), zap.String("target", p.target),
		zap.String("approval_id", state), zap.Int64("cost", t.outcome.Cost), zap.Duration("timeout", ap.Wait()), zap.Bool("input_required", true))
	// The request is answered without being forwarded: its decision
	// waits for the approval, its reservation goes back, and the retry is
	// decided and reserved afresh.
	if s.cfg.Evidence != nil {
		t.auditID = receipt.NewUUIDURN()
	}
	p.ev.approvalID, p.ev.waiting, p.ev.auditID = state, true, t.auditID
	s.decided(p, &p.dec)
	// Its rate-limit slots go back too: the retry is the call, and takes
	// them, so that an approved call counts once.
	s.gateOf(p).ReleaseUnforwarded(p.decision)
	s.settleNow(p, 0, true, outcomeNotForwarded)
	s.toClient.write(append(b, '\n'))
	p.free()
}

// approvalRetry handles a request that comes back with the answer to the
// proxy's input request: the requestState must be one the proxy issued
// and has not seen back, not expired, for this same request.
func (s *session) approvalRetry(p *pending, m modernParams, digest [32]byte, token string) {
	s.mu.Lock()
	t := s.appr.trips[m.state]
	delete(s.appr.trips, m.state) // one retry per approval, whatever it brings
	s.mu.Unlock()
	if t == nil {
		s.refuseUnasked(p, gate.ApprovalDeclined, "params.requestState names no approval this proxy is waiting for (it was used, expired, or never issued)")
		return
	}
	o := &t.outcome
	o.DecidedAt = time.Now()
	switch {
	case o.DecidedAt.After(o.ExpiresAt):
		o.refused(VerdictTimeout, gate.ApprovalDeclined, "no answer to the approval request within "+o.ExpiresAt.Sub(o.RequestedAt).String())
	case t.digest != digest:
		o.refused(VerdictDeclined, gate.ApprovalDeclined, "the request sent back with the answer is not the request that was to be approved")
	case m.answer == nil:
		o.refused(VerdictUnavailable, gate.ApprovalUnavailable, "params.inputResponses holds no answer to "+approvalInputKey)
	default:
		o.judge(readApprovalResult(m.answer))
		if m.answerer != "" {
			o.Answerer = m.answerer
		}
	}
	s.concluded(p, o)
	if !o.Approved {
		s.refuseHeld(p, o.Denial, o.Detail, &s.clientLog, true)
		p.free()
		return
	}
	p.up = t.up
	s.forwardHeld(&heldCall{p: p, fwd: t.fwd, outcome: *o, token: token})
}

// requestDigest is what a request that comes back with an approval must
// match: its method, target, arguments and token.
func (s *session) requestDigest(p *pending, cp *callParams) [32]byte {
	h := sha256.New()
	write := func(b []byte) {
		var n [8]byte
		for i, l := 0, len(b); i < 8; i, l = i+1, l>>8 {
			n[i] = byte(l)
		}
		h.Write(n[:])
		h.Write(b)
	}
	write([]byte(p.method))
	write([]byte(p.target))
	var args bytes.Buffer
	if json.Compact(&args, cp.arguments) != nil {
		args.Write(cp.arguments)
	}
	write(args.Bytes())
	d, _ := readDelegateos(cp.delegateos)
	write([]byte(s.callToken(cp)))
	write([]byte(d.ContractID))
	write([]byte(d.DelegationID))
	if d.MaxCost != nil {
		write([]byte(strconv.FormatInt(*d.MaxCost, 10)))
	} else {
		write(nil)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// abandoned records the end of an approval asked with input_required
// whose call was never sent back (it expired, or the session ended): its
// line, and with an audit log its human approval receipt, which names the
// WAITING decision.
func (s *session) abandoned(t *roundTrip, verdict, detail string, at time.Time) {
	o := &t.outcome
	o.DecidedAt = at
	den := gate.ApprovalDeclined
	if verdict == VerdictUnavailable {
		den = gate.ApprovalUnavailable
	}
	o.refused(verdict, den, detail)
	s.logApproval(o)
	if s.cfg.Evidence == nil {
		return
	}
	b := s.approvalBody(&t.asked, o)
	b.GateAuditID = t.auditID
	if _, err := s.cfg.Evidence.Approval(b); err != nil {
		s.log.Error("writing the human approval receipt failed", zap.String("approval_id", o.ID), zap.Error(err))
	}
}

// dropTrips ends, when the session ends, every approval asked with
// input_required whose call was not sent back.
func (s *session) dropTrips() {
	s.mu.Lock()
	trips := s.appr.trips
	s.appr.trips = nil
	s.mu.Unlock()
	now := time.Now()
	for _, t := range trips {
		if now.After(t.outcome.ExpiresAt) {
			s.abandoned(t, VerdictTimeout, "the call was not sent back with the answer within "+t.outcome.ExpiresAt.Sub(t.outcome.RequestedAt).String(), t.outcome.ExpiresAt)
			continue
		}
		s.abandoned(t, VerdictUnavailable, "the session ended before the call was sent back with the answer", now)
	}
}
