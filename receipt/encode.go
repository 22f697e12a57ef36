package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/internal/canon"
)

// objWriter writes one JSON object's members in RFC 8785 order. Every key
// of a receipt is ASCII, where JCS's UTF-16 order is byte order. Values
// are written canonical into buf as they are added; members hold their
// place there.
type objWriter struct {
	buf []byte
	ms  []member
	err error
	// sub is the writer of nested objects, kept for reuse.
	sub *objWriter
	// proofAt is, after appendTo, the offset in its output where a
	// "proof" member goes (before the comma of the member after it).
	proofAt int
	// direct writes each member straight into buf, key and value, for a
	// body whose members are added in key order (last is the last key;
	// a member out of order is an error, and the caller writes the body
	// again the other way).
	direct bool
	last   string
}

// errOrder: a member added out of key order in direct mode.
var errOrder = errors.New("members out of order")

// begin starts a member: in direct mode it writes its key; otherwise it
// returns where its value starts in buf.
func (w *objWriter) begin(key string) int {
	if !w.direct {
		return len(w.buf)
	}
	if w.last != "" {
		if key <= w.last {
			w.err = errOrder
		}
		w.buf = append(w.buf, ',')
	}
	w.last = key
	w.buf = canon.AppendString(w.buf, key)
	w.buf = append(w.buf, ':')
	return len(w.buf)
}

type member struct {
	key        string
	start, end int
}

func (w *objWriter) add(key string, start int) {
	if !w.direct {
		w.ms = append(w.ms, member{key: key, start: start, end: len(w.buf)})
	}
}

// str adds a string member; omit leaves out "".
func (w *objWriter) str(key, v string, omit bool) {
	if omit && v == "" {
		return
	}
	at := w.begin(key)
	w.buf = canon.AppendString(w.buf, v)
	w.add(key, at)
}

func (w *objWriter) int(key string, v int64) {
	at := w.begin(key)
	w.buf = strconv.AppendInt(w.buf, v, 10)
	w.add(key, at)
}

func (w *objWriter) bool(key string, v bool) {
	at := w.begin(key)
	w.buf = strconv.AppendBool(w.buf, v)
	w.add(key, at)
}

// strs adds a list of strings, left out when empty.
func (w *objWriter) strs(key string, v []string) {
	if len(v) == 0 {
		return
	}
	at := w.begin(key)
	w.buf = append(w.buf, '[')
	for i, s := range v {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.buf = canon.AppendString(w.buf, s)
	}
	w.buf = append(w.buf, ']')
	w.add(key, at)
}

// raw adds JSON from outside (arguments, a result), canonicalized; left
// out when empty.
func (w *objWriter) raw(key string, v json.RawMessage) {
	if len(v) == 0 {
		return
	}
	c, err := jcs.Transform(v)
	if err != nil {
		w.err = err
		return
	}
	at := w.begin(key)
	w.buf = append(w.buf, c...)
	w.add(key, at)
}

// object adds a nested object written by fill.
func (w *objWriter) object(key string, fill func(*objWriter)) {
	if w.sub == nil {
		w.sub = new(objWriter)
	}
	inner := w.sub
	inner.reset()
	fill(inner)
	if inner.err != nil {
		w.err = inner.err
	}
	at := w.begin(key)
	w.buf = inner.appendTo(w.buf)
	w.add(key, at)
}

func (w *objWriter) position(p *Position) {
	w.str("audit_prev", p.Prev, true)
	if p.Seq != 0 {
		w.int("audit_seq", p.Seq)
	}
}

func (w *objWriter) proof(p *Proof) {
	if p == nil {
		return
	}
	w.object("proof", func(o *objWriter) {
		o.str("cryptosuite", p.Cryptosuite, false)
		o.str("proofValue", p.ProofValue, false)
		o.str("type", p.Type, false)
		o.str("verificationMethod", p.VerificationMethod, false)
	})
}

func compareMembers(a, b member) int { return strings.Compare(a.key, b.key) }

func (w *objWriter) reset() {
	w.buf, w.ms, w.err, w.proofAt, w.direct, w.last = w.buf[:0], w.ms[:0], nil, 0, false, ""
}

// appendTo writes the object, members sorted by key.
func (w *objWriter) appendTo(dst []byte) []byte {
	// The hot kinds add their members in order already.
	if !slices.IsSortedFunc(w.ms, compareMembers) {
		slices.SortFunc(w.ms, compareMembers)
	}
	dst = append(dst, '{')
	w.proofAt = -1
	for i, m := range w.ms {
		if w.proofAt < 0 && m.key > "proof" {
			w.proofAt = len(dst)
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = canon.AppendString(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, w.buf[m.start:m.end]...)
	}
	if w.proofAt < 0 {
		w.proofAt = len(dst)
	}
	return append(dst, '}')
}

// encode is the canonical JSON of b, the same bytes as canon.Marshal(b)
// (a test holds them equal), written without reflection.
func encode(b Body) ([]byte, error) {
	out, _, err := encodeAt(b)
	return out, err
}

// encodeAt is encode that also returns where a "proof" member would go.
func encodeAt(b Body) ([]byte, int, error) {
	w := objWriter{buf: make([]byte, 0, 1024), ms: make([]member, 0, 32)}
	if err := w.body(b); err != nil {
		if errors.Is(err, errNoWriter) {
			out, err := canon.Marshal(b)
			return out, -1, err
		}
		return nil, -1, err
	}
	out := w.appendTo(make([]byte, 0, len(w.buf)+len(w.ms)*24+2))
	return out, w.proofAt, nil
}

// canonChecker is what canonical reuses from receipt to receipt.
type canonChecker struct {
	w   objWriter
	out []byte
}

var checkers = sync.Pool{New: func() any { return new(canonChecker) }}

// canonical reports whether data is the canonical JSON of b, the bytes
// encode writes, in buffers reused from call to call (audit verify checks
// every line of a log).
func canonical(b Body, data []byte) bool {
	c := checkers.Get().(*canonChecker)
	defer checkers.Put(c)
	c.w.reset()
	if err := c.w.body(b); err != nil {
		if !errors.Is(err, errNoWriter) {
			return false
		}
		out, err := canon.Marshal(b)
		return err == nil && bytes.Equal(out, data)
	}
	c.out = c.w.appendTo(c.out[:0])
	ok := bytes.Equal(c.out, data)
	if cap(c.out) > 64<<10 {
		c.out, c.w.buf = nil, nil // a large receipt's buffers are not kept
	}
	return ok
}

// Encoder writes receipts without a proof of their own (audit log
// entries) into buffers it reuses: the audit log's writer keeps one, so
// that an entry costs no allocation of its own.
type Encoder struct{ w objWriter }

// Append appends the canonical JSON of b, without its proof (which is
// cleared), to dst.
func (e *Encoder) Append(dst []byte, b Body) ([]byte, error) {
	*b.proof() = nil
	switch b.(type) {
	case *DecisionBody, *ExecutionBody:
		// Their members are added in key order: written straight into
		// dst, each once.
		own := e.w.buf
		e.w.reset()
		e.w.direct = true
		start := len(dst)
		e.w.buf = append(dst, '{')
		err := e.w.body(b)
		out := append(e.w.buf, '}')
		e.w.reset()
		e.w.buf = own[:0]
		if err == nil {
			return out, nil
		}
		dst = out[:start]
	}
	e.w.reset()
	if err := e.w.body(b); err != nil {
		if !errors.Is(err, errNoWriter) {
			return dst, fmt.Errorf("canonicalize the %s: %w", b.kind(), err)
		}
		out, err := canon.Marshal(b)
		if err != nil {
			return dst, fmt.Errorf("canonicalize the %s: %w", b.kind(), err)
		}
		dst = append(dst, out...)
	} else {
		dst = e.w.appendTo(dst)
	}
	return dst, nil
}

// errNoWriter: a body encode has no writer for (canon.Marshal encodes it).
var errNoWriter = errors.New("no writer for this body")

// body adds b's members to w.
func (w *objWriter) body(b Body) error {
	switch b := b.(type) {
	case *DecisionBody:
		// Members in key order (appendTo then need not sort them).
		w.str("action", b.Action, false)
		w.str("agent_did", b.AgentDID, true)
		w.str("approval_id", b.ApprovalID, true)
		w.str("approval_receipt_hash", b.ApprovalReceiptHash, true)
		w.raw("arguments", b.Arguments)
		w.str("arguments_hash", b.ArgumentsHash, true)
		w.str("arguments_json", b.ArgumentsJSON, true)
		w.str("arguments_omitted", b.ArgumentsOmitted, true)
		w.str("audit_id", b.AuditID, false)
		w.position(&b.Position)
		if c := b.Capability; c != nil {
			w.object("capability", func(o *objWriter) {
				o.str("action", c.Action, false)
				o.str("namespace", c.Namespace, false)
				o.str("resource", c.Resource, false)
			})
		}
		w.strs("chain", b.Chain)
		w.str("contract_id", b.ContractID, true)
		w.int("cost_reserved", b.CostReserved)
		w.str("decided_at", b.DecidedAt, false)
		w.str("decision", b.Decision, false)
		w.strs("delegation_path", b.DelegationPath)
		w.str("denial_detail", b.DenialDetail, true)
		w.str("denial_type", b.DenialType, true)
		w.bool("enforced", b.Enforced)
		w.str("environment", b.Environment, false)
		w.str("method", b.Method, false)
		w.str("payload_hash", b.PayloadHash, false)
		w.str("policy_context_hash", b.PolicyContextHash, false)
		w.proof(b.Proof)
		w.str("reason", b.Reason, false)
		w.str("resource", b.Resource, false)
		w.str("schema_version", b.SchemaVersion, false)
	case *ExecutionBody:
		w.str("action", b.Action, false)
		w.str("adapter", b.Adapter, false)
		w.str("agent_did", b.AgentDID, true)
		w.str("approval_receipt_hash", b.ApprovalReceiptHash, true)
		w.position(&b.Position)
		w.str("completed_at", b.CompletedAt, false)
		w.int("cost_committed", b.CostCommitted)
		w.str("decision_receipt_hash", b.DecisionReceiptHash, false)
		w.int("duration_us", b.DurationMicros)
		w.str("environment", b.Environment, false)
		w.str("evaluator_version", b.EvaluatorVersion, false)
		w.str("gate_audit_id", b.GateAuditID, false)
		w.str("operation", b.Operation, false)
		w.str("outcome", b.Outcome, false)
		w.str("params_hash", b.ParamsHash, true)
		w.proof(b.Proof)
		w.str("receipt_id", b.ReceiptID, false)
		w.str("request_hash", b.RequestHash, false)
		w.str("resource", b.Resource, false)
		w.str("response_hash", b.ResponseHash, true)
		w.raw("result", b.Result)
		w.str("result_json", b.ResultJSON, true)
		w.str("result_omitted", b.ResultOmitted, true)
		w.str("schema_version", b.SchemaVersion, false)
		w.str("started_at", b.StartedAt, false)
		w.str("status", b.Status, false)
	case *HumanApprovalBody:
		w.str("schema_version", b.SchemaVersion, false)
		w.str("approval_id", b.ApprovalID, false)
		w.str("gate_audit_id", b.GateAuditID, false)
		w.str("requester_agent_did", b.RequesterAgentDID, true)
		w.str("principal_did", b.PrincipalDID, true)
		w.str("action", b.Action, false)
		w.str("resource", b.Resource, false)
		w.str("environment", b.Environment, false)
		w.str("risk_class", b.RiskClass, false)
		w.str("gate_reason", b.GateReason, false)
		w.str("decision", b.Decision, false)
		w.str("reason", b.Reason, false)
		w.str("requested_at", b.RequestedAt, false)
		w.str("decided_at", b.DecidedAt, false)
		w.str("expires_at", b.ExpiresAt, true)
		w.str("evaluator_version", b.EvaluatorVersion, false)
		w.int("cost", b.Cost)
		w.str("delegation_receipt_id", b.DelegationReceiptID, true)
		w.str("delegation_receipt_hash", b.DelegationReceiptHash, true)
		w.str("decision_receipt_hash", b.DecisionReceiptHash, true)
		w.str("answered_by", b.AnsweredBy, true)
		w.str("answer_action", b.AnswerAction, true)
		w.str("answer_hash", b.AnswerHash, true)
		w.str("request_hash", b.RequestHash, true)
		w.position(&b.Position)
		w.proof(b.Proof)
	case *CheckpointBody:
		w.str("schema_version", b.SchemaVersion, false)
		w.int("length", b.Length)
		w.str("head", b.Head, false)
		w.bool("final", b.Final)
		if b.Recovered != nil {
			w.bool("recovered", *b.Recovered)
		}
		w.str("at", b.At, false)
		w.str("checkpoint", b.Checkpoint, true)
		w.position(&b.Position)
		w.proof(b.Proof)
	default:
		return errNoWriter
	}
	return w.err
}

// withProof is the canonical JSON of a body whose canonical JSON without
// proof is unsigned, with p inserted at at (from encodeAt).
func withProof(unsigned []byte, at int, p *Proof) []byte {
	var w objWriter
	w.proof(p)
	proof := w.appendTo(nil)
	proof = proof[1 : len(proof)-1] // "proof":{...}
	out := make([]byte, 0, len(unsigned)+len(proof)+1)
	out = append(out, unsigned[:at]...)
	if unsigned[at-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, proof...)
	if unsigned[at-1] == '{' && unsigned[at] != '}' {
		out = append(out, ',')
	}
	return append(out, unsigned[at:]...)
}
