package receipt

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// The audit log's writer encodes decision and execution receipts straight
// from the records the relay hands over, into the batch it writes: no
// body, no string of its own per member. AppendDecision and
// AppendExecution write the bytes Encoder.Append writes of Body's body at
// the same position (TestDirectIsAppend holds them equal over randomized
// records), so a receipt does not change with the path that wrote it.

// uuidLen is the length of a urn:uuid's text after "urn:uuid:".
const uuidLen = 36

// readRandom is where UUIDs come from (a test replays it).
var readRandom = rand.Read

// newUUID writes a random (version 4) UUID's text into out.
func newUUID(out *[uuidLen]byte) {
	var b [16]byte
	_, _ = readRandom(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
}

// ensureID gives d its audit_id, once: AuditID when the proxy chose it,
// otherwise a random urn:uuid made here.
func (d *Decision) ensureID() {
	if d.AuditID == "" && !d.hasID {
		newUUID(&d.id)
		d.hasID = true
	}
}

// auditIDString is d's audit_id as a string (ensureID first).
func (d *Decision) auditIDString() string {
	if d.AuditID != "" || !d.hasID {
		return d.AuditID
	}
	return "urn:uuid:" + string(d.id[:])
}

// appendAuditID appends d's audit_id as a JSON string (ensureID first).
func (d *Decision) appendAuditID(dst []byte) []byte {
	if d.AuditID != "" || !d.hasID {
		return canon.AppendString(dst, d.AuditID)
	}
	dst = append(dst, `"urn:uuid:`...)
	dst = append(dst, d.id[:]...)
	return append(dst, '"')
}

// appendDigest appends the digest of d's receipt, "" when it was not
// written.
func (d *Decision) appendDigest(dst []byte) []byte {
	dst = append(dst, '"')
	if d.signed {
		dst = hex.AppendEncode(dst, d.digest[:])
	}
	return append(dst, '"')
}

// appendHash appends "sha256:HEX" of h as a JSON string.
func appendHash(dst []byte, h *[32]byte) []byte {
	dst = append(dst, `"sha256:`...)
	dst = hex.AppendEncode(dst, h[:])
	return append(dst, '"')
}

// appendTime appends t as timestamp.Format writes it, a JSON string (its
// characters need no escape). The part above the millisecond is formatted
// once per second (a call's receipts carry three times, mostly within one
// second of each other).
func appendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	u := t.UTC()
	sec := u.Unix()
	s := lastSecond.Load()
	if s == nil || s.sec != sec {
		const width = len("2006-01-02T15:04:05.")
		whole := u.Format("2006-01-02T15:04:05.")
		if len(whole) != width {
			// A year outside 0000-9999 has another width: no cache.
			return append(u.AppendFormat(dst, timestamp.Layout), '"')
		}
		s = &utcSecond{sec: sec, prefix: whole}
		lastSecond.Store(s)
	}
	dst = append(dst, s.prefix...)
	ms := u.Nanosecond() / 1e6 // truncated, as the layout's .000 is
	return append(dst, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z', '"')
}

// utcSecond is one second's UTC time formatted up to its milliseconds,
// "2006-01-02T15:04:05.".
type utcSecond struct {
	sec    int64
	prefix string
}

// lastSecond is the last second appendTime formatted.
var lastSecond atomic.Pointer[utcSecond]

// appendPosition appends the members audit_prev and audit_seq of an entry
// at seq (at least 1) after the entry whose digest is prev.
func appendPosition(dst []byte, seq int64, prev *[32]byte) []byte {
	dst = append(dst, `,"audit_prev":"`...)
	dst = hex.AppendEncode(dst, prev[:])
	dst = append(dst, `","audit_seq":`...)
	return strconv.AppendInt(dst, seq, 10)
}

// appendStr appends the member key (given as `,"key":`) with the string v,
// left out when omit and v is "".
func appendStr(dst []byte, key, v string, omit bool) []byte {
	if omit && v == "" {
		return dst
	}
	return canon.AppendString(append(dst, key...), v)
}

// appendStrs appends the member key with the list v, left out when empty.
func appendStrs(dst []byte, key string, n int, at func(int) string) []byte {
	if n == 0 {
		return dst
	}
	dst = append(dst, key...)
	dst = append(dst, '[')
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = canon.AppendString(dst, at(i))
	}
	return append(dst, ']')
}

// appendClear appends a clear member (arguments_json, result_json) and its
// omitted member as clearText and OmitClear (with omit) make them.
func appendClear(dst []byte, key, omittedKey string, text []byte, omit bool) []byte {
	json, omitted := clearText(text)
	if omit && json != "" {
		json, omitted = "", OmittedTooLarge
	}
	if json != "" {
		dst = append(dst, key...)
		dst = canon.AppendString(dst, json)
	}
	return appendStr(dst, omittedKey, omitted, true)
}

// AppendDecision appends d's decision receipt, entry seq (at least 1) of
// an audit log whose entry before has the digest prev, unsigned: the
// bytes Append writes of d.Body(o) at that position; omitClear writes it
// as after OmitClear. It gives d its audit_id, as Body does.
func (e *Encoder) AppendDecision(dst []byte, d *Decision, o *Options, seq int64, prev *[32]byte, omitClear bool) []byte {
	d.ensureID()
	dst = append(dst, `{"action":`...)
	dst = canon.AppendString(dst, Action(d.Method))
	dst = appendStr(dst, `,"agent_did":`, agentDID(d.Scope, o), true)
	dst = appendStr(dst, `,"approval_id":`, d.ApprovalID, true)
	dst = appendStr(dst, `,"approval_receipt_hash":`, d.ApprovalReceiptHash, true)
	if d.HasArguments {
		dst = append(dst, `,"arguments_hash":`...)
		dst = appendHash(dst, &d.ArgumentsHash)
		if o.IncludeArguments {
			dst = appendClear(dst, `,"arguments_json":`, `,"arguments_omitted":`, d.Arguments, omitClear)
		}
	}
	dst = append(dst, `,"audit_id":`...)
	dst = d.appendAuditID(dst)
	dst = appendPosition(dst, seq, prev)
	if c := d.Requested; c != nil {
		dst = append(dst, `,"capability":{"action":`...)
		dst = canon.AppendString(dst, Clip(c.Action))
		dst = append(dst, `,"namespace":`...)
		dst = canon.AppendString(dst, Clip(c.Namespace))
		dst = append(dst, `,"resource":`...)
		dst = canon.AppendString(dst, Clip(c.Resource))
		dst = append(dst, '}')
	}
	var path int
	if s := d.Scope; s != nil {
		path = len(s.Chain)
		var chain []string
		if o.BlockIDs != nil {
			chain = o.BlockIDs(d.Token)
		} else {
			chain = ParseBlockIDs(d.Token)
		}
		if len(chain) == path {
			dst = appendStrs(dst, `,"chain":`, len(chain), func(i int) string { return chain[i] })
		}
		dst = appendStr(dst, `,"contract_id":`, s.ContractID, true)
	}
	dst = append(dst, `,"cost_reserved":`...)
	dst = strconv.AppendInt(dst, d.CostReserved, 10)
	dst = append(dst, `,"decided_at":`...)
	dst = appendTime(dst, d.At)
	decision, reason := DecisionAllow, "allowed"
	if d.Unauthenticated {
		reason = "allowed_unauthenticated"
	}
	if d.Waiting && d.Allowed {
		decision, reason = DecisionWaiting, "waiting_for_human_approval"
	}
	if !d.Allowed {
		decision, reason = DecisionBlock, d.DenialType
	}
	dst = append(dst, `,"decision":"`...)
	dst = append(dst, decision...)
	dst = append(dst, '"')
	if path > 0 {
		links := d.Scope.Chain
		dst = appendStrs(dst, `,"delegation_path":`, path, func(i int) string { return links[i].DelegationID })
	}
	dst = appendStr(dst, `,"denial_detail":`, Clip(d.DenialDetail), true)
	dst = appendStr(dst, `,"denial_type":`, d.DenialType, true)
	if d.Enforced {
		dst = append(dst, `,"enforced":true`...)
	} else {
		dst = append(dst, `,"enforced":false`...)
	}
	dst = append(dst, `,"environment":"`+EnvironmentUnknown+`","method":`...)
	dst = canon.AppendString(dst, d.Method)
	dst = append(dst, `,"payload_hash":`...)
	dst = appendHash(dst, &d.Payload)
	policyHash := o.PolicyHash
	if d.PolicyHash != "" {
		policyHash = d.PolicyHash // decided by a policy reloaded since
	}
	dst = appendStr(dst, `,"policy_context_hash":`, policyHash, false)
	dst = appendStr(dst, `,"reason":`, reason, false)
	dst = appendStr(dst, `,"resource":`, Clip(d.Target), false)
	return append(dst, `,"schema_version":"`+KindDecision+`"}`...)
}

// AppendExecution appends x's execution receipt, entry seq of an audit log
// whose entry before has the digest prev, unsigned: the bytes Append
// writes of x.Body(o) at that position; omitClear writes it as after
// OmitClear. Its decision's receipt must have been written first.
func (e *Encoder) AppendExecution(dst []byte, x *Execution, o *Options, seq int64, prev *[32]byte, omitClear bool) []byte {
	d := x.Decision
	dst = append(dst, `{"action":`...)
	dst = canon.AppendString(dst, Action(d.Method))
	dst = append(dst, `,"adapter":"mcp-stdio"`...)
	dst = appendStr(dst, `,"agent_did":`, agentDID(d.Scope, o), true)
	dst = appendStr(dst, `,"approval_receipt_hash":`, d.ApprovalReceiptHash, true)
	dst = appendPosition(dst, seq, prev)
	dst = append(dst, `,"completed_at":`...)
	dst = appendTime(dst, x.Completed)
	dst = append(dst, `,"cost_committed":`...)
	dst = strconv.AppendInt(dst, x.CostCommitted, 10)
	dst = append(dst, `,"decision_receipt_hash":`...)
	dst = d.appendDigest(dst)
	dst = append(dst, `,"duration_us":`...)
	dst = strconv.AppendInt(dst, max(x.Completed.Sub(x.Started).Microseconds(), 0), 10)
	dst = append(dst, `,"environment":"`+EnvironmentUnknown+`","evaluator_version":"`+ExecutionEvaluator+`","gate_audit_id":`...)
	dst = d.appendAuditID(dst)
	dst = append(dst, `,"operation":`...)
	dst = canon.AppendString(dst, d.Method)
	dst = append(dst, `,"outcome":`...)
	dst = canon.AppendString(dst, x.Outcome)
	if d.HasArguments {
		dst = append(dst, `,"params_hash":`...)
		dst = appendHash(dst, &d.ArgumentsHash)
	}
	var id [uuidLen]byte
	newUUID(&id)
	dst = append(dst, `,"receipt_id":"urn:uuid:`...)
	dst = append(dst, id[:]...)
	dst = append(dst, `","request_hash":`...)
	dst = appendHash(dst, &x.Request)
	dst = appendStr(dst, `,"resource":`, Clip(d.Target), false)
	if x.HasResponse {
		dst = append(dst, `,"response_hash":`...)
		dst = appendHash(dst, &x.Response)
		if o.IncludeResults {
			dst = appendClear(dst, `,"result_json":`, `,"result_omitted":`, x.Result, omitClear)
		}
	}
	dst = append(dst, `,"schema_version":"`+KindExecution+`","started_at":`...)
	dst = appendTime(dst, x.Started)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, status(x.Outcome)...)
	return append(dst, `"}`...)
}
