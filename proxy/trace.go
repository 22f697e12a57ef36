package proxy

import (
	"context"
	"encoding/hex"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/delegateos/delegateos/gate"
)

// Tracing (Config.Tracer): each gated request gets a server span, named
// for its method and target, whose parent is the trace context the client
// put in params._meta (traceparent, tracestate: the W3C Trace Context
// fields, as MCP carries them); a request that is forwarded gets a client
// span for the upstream call, and is forwarded with that span's
// traceparent in its params._meta, so that the upstream's spans join the
// trace. Nothing is changed when tracing is off.

// Span attributes. The MCP ones follow OpenTelemetry's MCP semantic
// conventions; the rest are delegateos's own.
const (
	attrMethod      = "mcp.method.name"
	attrSessionID   = "mcp.session.id"
	attrTarget      = "delegateos.target"
	attrDecision    = "delegateos.decision"
	attrDenialType  = "delegateos.denial_type"
	attrCapability  = "delegateos.capability"
	attrDelegation  = "delegateos.delegation_id"
	attrPath        = "delegateos.delegation_path"
	attrDepth       = "delegateos.chain_depth"
	attrReserved    = "delegateos.cost.reserved_microcents"
	attrCharged     = "delegateos.cost.charged_microcents"
	attrOutcome     = "delegateos.outcome"
	attrEnforced    = "delegateos.enforced"
	attrErrorType   = "error.type"
	traceparentLen  = len("00-") + 32 + len("-") + 16 + len("-") + 2
	maxTraceContext = 512 // longer traceparent/tracestate values are ignored
)

// startSpan starts p's span, a child of the trace context the request's
// params._meta carries.
func (s *session) startSpan(p *pending, req *gate.CallRequest, meta []byte) {
	ctx := context.Background()
	if carrier := metaTraceContext(meta); carrier != nil {
		ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	}
	name := p.method
	if t := req.Target(); t != "" {
		name += " " + truncate(t, 128)
	}
	_, p.span = s.cfg.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String(attrMethod, p.method), attribute.String(attrTarget, truncate(req.Target(), 1024))))
}

// spanDecided adds a decision to p's span; a refused request's span ends.
func spanDecided(p *pending, d *gate.Decision, enforced bool) {
	if p.span == nil {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	if d.Allowed {
		attrs = append(attrs, attribute.String(attrDecision, "allow"))
	} else {
		attrs = append(attrs, attribute.String(attrDecision, "deny"), attribute.Bool(attrEnforced, enforced))
	}
	if c := gate.Requested(d.Call); c != nil {
		attrs = append(attrs, attribute.String(attrCapability, c.String()))
	}
	if d.Scope != nil {
		attrs = append(attrs, attribute.String(attrDelegation, d.Scope.DelegationID), attribute.Int64(attrDepth, d.Scope.ChainDepth))
		if len(d.Scope.Chain) > 0 {
			ids := make([]string, len(d.Scope.Chain))
			for i, l := range d.Scope.Chain {
				ids[i] = l.DelegationID
			}
			attrs = append(attrs, attribute.StringSlice(attrPath, ids))
		}
	}
	if d.Reservation != nil {
		attrs = append(attrs, attribute.Int64(attrReserved, d.Reservation.Cost()))
	}
	if d.Denial != nil {
		t := string(d.Denial.Type)
		attrs = append(attrs, attribute.String(attrDenialType, t), attribute.String(attrErrorType, t))
		if enforced {
			p.span.SetStatus(codes.Error, "refused: "+t)
		}
	}
	p.span.SetAttributes(attrs...)
	if !d.Allowed && enforced {
		endSpans(p, "")
	}
}

// spanForward starts p's upstream span and sets p.traceparent to its
// context, which forwardEdits writes into the forwarded params._meta.
func (s *session) spanForward(p *pending, method string) {
	if p.span == nil || p.upSpan != nil {
		return
	}
	ctx := trace.ContextWithSpan(context.Background(), p.span)
	_, p.upSpan = s.cfg.Tracer.Start(ctx, "upstream "+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(attrMethod, method)))
	sc := p.upSpan.SpanContext()
	if !sc.IsValid() {
		return
	}
	b := append(p.tpBuf[:0], "00-"...)
	tid, sid := sc.TraceID(), sc.SpanID()
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, []byte{byte(sc.TraceFlags())})
	p.traceparent = b
}

// spanSettled records how a forwarded call ended and ends its spans.
func spanSettled(p *pending, cost int64, outcome string) {
	if p.span == nil {
		return
	}
	p.span.SetAttributes(attribute.Int64(attrCharged, cost))
	endSpans(p, outcome)
}

// endSpans ends p's spans, with the call's outcome when known.
func endSpans(p *pending, outcome string) {
	if p.upSpan != nil {
		if outcome != "" {
			p.upSpan.SetAttributes(attribute.String(attrOutcome, outcome))
			if outcome != outcomeResult {
				p.upSpan.SetStatus(codes.Error, outcome)
			}
		}
		p.upSpan.End()
		p.upSpan = nil
	}
	if p.span != nil {
		if outcome != "" {
			p.span.SetAttributes(attribute.String(attrOutcome, outcome))
		}
		p.span.End()
		p.span = nil
	}
}

// traceEdit is the edit that puts p.traceparent into the forwarded
// params._meta: the value of an existing traceparent member replaced, or a
// member added to _meta, or a _meta added to the params. ok is false when
// nothing is to be propagated (no span, or a _meta that is not an object).
func traceEdit(p *pending, h header, cp *callParams) (edit, bool) {
	if p == nil || len(p.traceparent) == 0 || h.params == nil {
		return edit{}, false
	}
	tp := p.traceparent
	if cp.meta == nil {
		with := make([]byte, 0, len(tp)+32)
		with = append(with, `"_meta":{"traceparent":"`...)
		with = append(with, tp...)
		with = append(with, `"}`...)
		if cp.members > 0 && !(cp.strip && cp.members == 1) {
			with = append(with, ',')
		}
		at := h.paramsAt + cp.open + 1
		return edit{from: at, to: at, with: with}, true
	}
	from, to, members, ok := traceparentMember(cp.meta)
	if !ok {
		return edit{}, false
	}
	at := h.paramsAt + cp.metaAt
	if from >= 0 {
		with := make([]byte, 0, len(tp)+2)
		with = append(append(append(with, '"'), tp...), '"')
		return edit{from: at + from, to: at + to, with: with}, true
	}
	with := make([]byte, 0, len(tp)+20)
	with = append(with, `"traceparent":"`...)
	with = append(append(with, tp...), '"')
	if members > 0 {
		with = append(with, ',')
	}
	in := at + meta0(cp.meta) + 1 // just inside its '{'
	return edit{from: in, to: in, with: with}, true
}

// meta0 is where the '{' of a _meta object is (after white space).
func meta0(meta []byte) int {
	i := 0
	for i < len(meta) && isSpace(meta[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// objectMembers calls fn with each member of the JSON object b: its name
// (decoded) and where its value starts and ends in b. It reports whether b
// is a well-formed object (fn may stop the walk early by returning false).
func objectMembers(b []byte, fn func(name []byte, from, to int) bool) bool {
	s := scanner{b: b}
	s.ws()
	if !s.eat('{') {
		return false
	}
	s.ws()
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		raw, ok := s.str()
		if !ok {
			return false
		}
		name, ok := memberName(raw)
		if !ok {
			return false
		}
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		start := s.i
		if !s.skip(1) {
			return false
		}
		if !fn(name, start, s.i) {
			return true
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		return s.eat('}')
	}
}

// traceparentMember finds the traceparent member of a _meta object: the
// span of its value (from < 0 when there is none) and how many members
// the object has. ok is false when meta is not an object.
func traceparentMember(meta []byte) (from, to, members int, ok bool) {
	from = -1
	ok = objectMembers(meta, func(name []byte, f, t int) bool {
		members++
		if string(name) == "traceparent" {
			from, to = f, t
		}
		return true
	})
	return from, to, members, ok
}

// metaTraceContext reads traceparent and tracestate from a _meta object;
// nil when it has neither (or is not a well-formed object).
func metaTraceContext(meta []byte) propagation.MapCarrier {
	if meta == nil {
		return nil
	}
	var carrier propagation.MapCarrier
	ok := objectMembers(meta, func(name []byte, from, to int) bool {
		if n := string(name); (n == "traceparent" || n == "tracestate") && to-from <= maxTraceContext {
			if v, ok := unquote(meta[from:to]); ok {
				if carrier == nil {
					carrier = propagation.MapCarrier{}
				}
				carrier[n] = v
			}
		}
		return true
	})
	if !ok {
		return nil
	}
	return carrier
}

// truncate cuts s to at most n bytes, at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
