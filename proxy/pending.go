package proxy

import (
	"bytes"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/delegateos/delegateos/gate"
)

// pending is a client request forwarded to the upstream and not yet answered.
type pending struct {
	key requestID
	// up is the id the request was forwarded with: the relay numbers the
	// requests it forwards itself, so an answer the upstream sends to a
	// request the client cancelled can never be taken for the answer to a
	// later request that reuses the client's id.
	up     int64
	id     []byte // the id as the client wrote it, for error replies
	method string
	// target is what a gated request names: the tool, the resource URI or
	// the prompt; for a list request, empty.
	target string
	// listToken is the token a list request carried in its own
	// _delegateos, by which its result is filtered; "" means the session's.
	listToken string
	// decision is &dec while the call holds a decision to settle, nil once
	// it is settled or claimed by another path.
	decision *gate.Decision
	dec      gate.Decision
	// snap is the snapshot a gated request was decided by, which settles
	// it and names its policy in its receipts (nil before it is decided).
	snap *gate.Snapshot
	// held is the request of a call held for approval, as the gate saw
	// it, to be decided again by the policy in force when it is approved
	// after a reload (nil for any other call).
	held  *gate.CallRequest
	start time.Time // when the gate began deciding
	// approval is the approval a held call was forwarded with; nil if it
	// needed none.
	approval *ApprovalOutcome
	ev       callEvidence
	// span is the gated request's span and upSpan its upstream call's,
	// when tracing is on (trace.go); traceparent is what the request is
	// forwarded with in params._meta, empty when nothing is propagated.
	span, upSpan trace.Span
	traceparent  []byte
	tpBuf        [traceparentLen]byte
	idBuf        [20]byte // id's storage when it fits, saving an allocation per call
}

// pendingPool recycles the pending requests the relay answered: one is
// made per call, and they are large (a Decision each).
var pendingPool = sync.Pool{New: func() any { return new(pending) }}

func newPending(key requestID, id []byte, method string) *pending {
	p := pendingPool.Get().(*pending)
	p.key, p.method = key, method
	p.id = append(p.idBuf[:0:len(p.idBuf)], id...)
	return p
}

// free hands p back for reuse. The caller holds the only reference to it:
// p is out of the pending table, settled, and nothing it owns (its id is
// stored in p) is still to be written.
func (p *pending) free() {
	if p.span != nil {
		endSpans(p, "")
	}
	*p = pending{}
	pendingPool.Put(p)
}

// cost is what the call holds: its reservation, which is what it is
// charged when it ends without a result that says otherwise.
func (p *pending) cost() int64 {
	if p.decision == nil || p.decision.Reservation == nil {
		return 0
	}
	return p.decision.Reservation.Cost()
}

// requestID is a request id as responses are matched to requests: a string
// by its value, an integer by its value. The client may only use canonical
// integers within ±(2^53−1), so an integer's value and text agree.
type requestID struct {
	str   string
	num   int64
	isStr bool
}

// maxIDBytes bounds a string request id (its JSON, quotes included).
const maxIDBytes = 258

// parseRequestID accepts the ids every JSON-RPC implementation reads the
// same way: strings of at most 256 bytes and integers within ±(2^53−1)
// written canonically. "1.0" or "1e0" would be answered as 1 by most servers
// and matched to the wrong request.
func parseRequestID(raw []byte) (requestID, bool) {
	if len(raw) > 0 && raw[0] == '"' {
		if len(raw) > maxIDBytes {
			return requestID{}, false
		}
		s, ok := unquote(raw)
		return requestID{str: s, isStr: true}, ok
	}
	n, ok := canonicalInt(raw)
	return requestID{num: n}, ok
}

const maxSafeInt = 1<<53 - 1

// canonicalInt reads an integer written as JSON writes it, without a sign
// on zero, leading zeros, fraction or exponent, within ±(2^53−1).
func canonicalInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 16 || b[0] == '0' && (len(b) > 1 || neg) {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > maxSafeInt {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// pendingTable holds the requests in flight, by the client's id and by
// the id they were forwarded with. The session's lock guards it.
type pendingTable struct {
	num intIndex
	str map[string]*pending
	up  intIndex
}

func newPendingTable() pendingTable {
	return pendingTable{str: map[string]*pending{}}
}

func (t *pendingTable) len() int { return t.up.len() }

func (t *pendingTable) get(k requestID) *pending {
	if k.isStr {
		return t.str[k.str]
	}
	return t.num.get(k.num)
}

func (t *pendingTable) put(p *pending) {
	if p.key.isStr {
		t.str[p.key.str] = p
	} else {
		t.num.set(p.key.num, p)
	}
	t.up.set(p.up, p)
}

func (t *pendingTable) remove(p *pending) {
	if p.key.isStr {
		delete(t.str, p.key.str)
	} else {
		t.num.del(p.key.num)
	}
	t.up.del(p.up)
}

// lookup returns the request that the client's JSON id raw (from a
// cancellation) names, or nil. A string matches by value, a number only
// if it is written as the client's was.
func (t *pendingTable) lookup(raw []byte) *pending {
	if len(raw) >= 2 && raw[0] == '"' {
		if v := raw[1 : len(raw)-1]; bytes.IndexByte(v, '\\') < 0 {
			return t.str[string(v)] // no allocation for a lookup
		}
		s, ok := unquote(raw)
		if !ok {
			return nil
		}
		return t.str[s]
	}
	n, ok := canonicalInt(raw)
	if !ok {
		return nil
	}
	return t.num.get(n)
}

// answered returns the request that an upstream response's id raw
// answers, or nil: the upstream must echo the number it was given.
func (t *pendingTable) answered(raw []byte) *pending {
	n, ok := canonicalInt(raw)
	if !ok {
		return nil
	}
	return t.up.get(n)
}

// drain removes and returns every request.
func (t *pendingTable) drain() []*pending {
	ps := make([]*pending, 0, t.len())
	t.up.each(func(p *pending) { ps = append(ps, p) })
	t.up.clear()
	t.num.clear()
	clear(t.str)
	return ps
}

// intIndexSlots is how many integer keys an intIndex holds without a map:
// the relay numbers what it forwards 1, 2, 3…, and clients number their
// requests much the same, so the keys in flight at once fall in distinct
// slots unless a request stays in flight while this many more are sent.
const intIndexSlots = 256

// intIndex is a map from int64 to *pending (get, set and del mean what
// they mean for a map) that keeps each key in the slot its low bits name
// when that slot is free, and in a map only when it is taken: a call then
// costs no hashing, no map insertion and no deletion. A key is in its slot
// or in the map, never both.
type intIndex struct {
	slots [intIndexSlots]intEntry
	more  map[int64]*pending
	n     int
}

type intEntry struct {
	k int64
	p *pending // nil: the slot is free
}

func (x *intIndex) slot(k int64) *intEntry { return &x.slots[uint64(k)%intIndexSlots] }

func (x *intIndex) len() int { return x.n }

func (x *intIndex) get(k int64) *pending {
	if e := x.slot(k); e.p != nil && e.k == k {
		return e.p
	}
	if len(x.more) == 0 {
		return nil
	}
	return x.more[k]
}

// set maps k to p (non-nil), in place of what k mapped to.
func (x *intIndex) set(k int64, p *pending) {
	e := x.slot(k)
	if e.p != nil && e.k == k {
		e.p = p
		return
	}
	if _, ok := x.more[k]; ok {
		x.more[k] = p
		return
	}
	x.n++
	if e.p == nil {
		*e = intEntry{k: k, p: p}
		return
	}
	if x.more == nil {
		x.more = map[int64]*pending{}
	}
	x.more[k] = p
}

func (x *intIndex) del(k int64) {
	if e := x.slot(k); e.p != nil && e.k == k {
		*e = intEntry{}
		x.n--
		return
	}
	if _, ok := x.more[k]; ok {
		delete(x.more, k)
		x.n--
	}
}

// each calls f with every value, in no particular order.
func (x *intIndex) each(f func(*pending)) {
	for i := range x.slots {
		if p := x.slots[i].p; p != nil {
			f(p)
		}
	}
	for _, p := range x.more {
		f(p)
	}
}

func (x *intIndex) clear() {
	x.slots = [intIndexSlots]intEntry{}
	x.more = nil
	x.n = 0
}
