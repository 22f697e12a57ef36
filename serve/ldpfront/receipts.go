package ldpfront

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/receipt"
)

// AuditLog is the server's audit log (audit.Log) as the relays hand it
// their decisions and calls, and as a Tap waits for it.
type AuditLog interface {
	Decided(*receipt.Decision)
	Executed(*receipt.Execution)
	Approval(*receipt.HumanApprovalBody) (string, error)
	Failed() bool
	// Written is closed once every receipt queued before the call is
	// written (its digest known).
	Written() <-chan struct{}
}

// Tap stands between the relays and the audit log: it hands everything
// on, and keeps the records of the calls a task made, recognised by the
// SHA-256 of the request as the front sent it (the decision's
// payload_hash), so that the task's provenance names its receipts.
type Tap struct {
	AuditLog
	// noLog: the server keeps no audit log; the Tap only notes whether the
	// gate allowed each task's call, and provenance names no receipts.
	noLog bool
	mu    sync.Mutex
	calls map[[32]byte]*taskReceipts
	byDec map[*receipt.Decision]*taskReceipts
}

// NewTap wraps log; the relays must be given the Tap in its place. With a
// nil log (a server without an audit log) nothing is written: the Tap only
// notes whether the gate allowed each task's call, so that an error the
// upstream shapes as the gate's denial is not taken for one.
func NewTap(log AuditLog) *Tap {
	t := &Tap{AuditLog: log, calls: map[[32]byte]*taskReceipts{}, byDec: map[*receipt.Decision]*taskReceipts{}}
	if log == nil {
		t.AuditLog, t.noLog = nullLog{}, true
	}
	return t
}

// nullLog keeps nothing.
type nullLog struct{}

var written = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (nullLog) Decided(*receipt.Decision)                           {}
func (nullLog) Executed(*receipt.Execution)                         {}
func (nullLog) Approval(*receipt.HumanApprovalBody) (string, error) { return "", nil }
func (nullLog) Failed() bool                                        { return false }
func (nullLog) Written() <-chan struct{}                            { return written }

// waitExecuted waits (at most receiptWait) for the end of c's call when
// the gate allowed it.
func (t *Tap) waitExecuted(c *taskReceipts) {
	if !t.gateAllowed(c) {
		return
	}
	timer := time.NewTimer(receiptWait)
	defer timer.Stop()
	select {
	case <-c.executed:
	case <-timer.C:
	}
}

// gateAllowed reports whether the gate decided c's call and allowed it:
// the call went to the upstream, so an error that comes back is the
// upstream's, whatever it is shaped as.
func (t *Tap) gateAllowed(c *taskReceipts) bool {
	if t == nil || c == nil {
		return false
	}
	select {
	case <-c.decided:
	default:
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return c.allowed
}

// taskReceipts are the records of one task's call: decided is closed
// when its decision is handed over, executed when its end is.
type taskReceipts struct {
	payload   [32]byte
	decision  *receipt.Decision
	allowed   bool
	execution *receipt.Execution
	decided   chan struct{}
	executed  chan struct{}
}

// Decided notes the decision of a watched call and hands it on.
func (t *Tap) Decided(d *receipt.Decision) {
	t.mu.Lock()
	if c := t.calls[d.Payload]; c != nil && c.decision == nil {
		// Read before the handover: from then on the record is the
		// writer's.
		c.decision, c.allowed = d, d.Allowed && d.Enforced && !d.Waiting
		t.byDec[d] = c
		close(c.decided)
	}
	t.mu.Unlock()
	t.AuditLog.Decided(d)
}

// Executed notes the end of a watched call and hands it on.
func (t *Tap) Executed(e *receipt.Execution) {
	t.mu.Lock()
	if c := t.byDec[e.Decision]; c != nil && c.execution == nil {
		c.execution = e
		close(c.executed)
	}
	t.mu.Unlock()
	t.AuditLog.Executed(e)
}

// watch starts noting the receipts of the request whose bytes are body.
func (t *Tap) watch(body []byte) *taskReceipts {
	c := &taskReceipts{payload: sha256.Sum256(body), decided: make(chan struct{}), executed: make(chan struct{})}
	t.mu.Lock()
	t.calls[c.payload] = c
	t.mu.Unlock()
	return c
}

func (t *Tap) forget(c *taskReceipts) {
	t.mu.Lock()
	delete(t.calls, c.payload)
	delete(t.byDec, c.decision)
	t.mu.Unlock()
}

// receiptWait bounds how long a task's reply waits for its receipts to be
// handed over and written; past it, provenance names what was written.
const receiptWait = 10 * time.Second

// hashes are the digests of c's decision and execution receipts, once
// written, in that order. The response to the call has come back: its
// decision, if the gate made one, was handed over before the relay
// answered or forwarded the call; its end may be handed over just after,
// and is waited for.
func (t *Tap) hashes(c *taskReceipts) []string {
	select {
	case <-c.decided:
	default:
		return nil // refused before the gate (the token, say)
	}
	timer := time.NewTimer(receiptWait)
	defer timer.Stop()
	t.mu.Lock()
	allowed := c.allowed
	t.mu.Unlock()
	if allowed {
		select {
		case <-c.executed:
		case <-timer.C:
		}
	}
	select {
	case <-t.Written():
	case <-timer.C:
		return nil
	}
	t.mu.Lock()
	d, e := c.decision, c.execution
	t.mu.Unlock()
	var out []string
	if h, ok := d.Digest(); ok {
		out = append(out, h)
	}
	if e != nil {
		if h, ok := e.Digest(); ok {
			out = append(out, h)
		}
	}
	return out
}

// charged is what the gate committed for c's allowed call, from its
// execution receipt, waited for as hashes does (with or without an audit
// log: the relays hand it over either way).
func (t *Tap) charged(c *taskReceipts) (int64, bool) {
	if t == nil || c == nil {
		return 0, false
	}
	select {
	case <-c.decided:
	default:
		return 0, false
	}
	t.mu.Lock()
	allowed := c.allowed
	t.mu.Unlock()
	if !allowed {
		return 0, false
	}
	timer := time.NewTimer(receiptWait)
	defer timer.Stop()
	select {
	case <-c.executed:
	case <-timer.C:
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return c.execution.CostCommitted, true
}

// provenance adds c's receipt hashes to p (made when nil); without an
// audit log (t nil, or without a log) p is returned as it is.
func (t *Tap) provenance(c *taskReceipts, p *ldp.ProvenanceDOS) *ldp.ProvenanceDOS {
	if t == nil || c == nil {
		return p
	}
	if t.noLog {
		// Nothing is written to name; the call's end is waited for all
		// the same, so that what it charged is known (charged).
		t.waitExecuted(c)
		return p
	}
	if p == nil {
		p = &ldp.ProvenanceDOS{}
	}
	p.ReceiptHashes = t.hashes(c)
	return p
}
