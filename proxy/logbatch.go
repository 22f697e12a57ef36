package proxy

import (
	"strconv"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/logline"
)

// callLine is one call's log line: the decision, and for an allowed call
// what it was charged and how it ended.
type callLine struct {
	// method is the request's; tool its target (the tool, prompt or URI).
	method, tool, reason, delegation string
	allowed                          bool
	cost                             int64
	latency                          time.Duration // the gate's
	// detail is a refused call's denial detail.
	detail string
	// An allowed call's line is written when it settles.
	settled                   bool
	upstream                  time.Duration
	outcome                   string
	released, unauthenticated bool
	// unenforced marks a refusal that observe mode forwarded anyway.
	unenforced bool
}

// logBatch holds call lines to be written later, in order. A batch
// belongs to one goroutine; its storage is reused from batch to batch.
type logBatch struct {
	lines  []callLine
	buf    []byte      // the encoded lines, for a core that takes them whole
	start  []byte      // how each of them starts (level, time, message)
	fields []zap.Field // one line's fields, for any other core
}

// maxBatchedLines bounds the lines a pump holds back: a stream of frames
// that never pauses still has its lines written.
const maxBatchedLines = 256

func (b *logBatch) len() int { return len(b.lines) }

// denied adds a refused call's line.
func (b *logBatch) denied(method, tool string, d *gate.Decision) {
	b.lines = append(b.lines, newCallLine(method, tool, d, d.Call.Cost))
	b.lines[len(b.lines)-1].detail = d.Denial.Detail
}

// observed adds the line of a call the gate refused and observe mode
// forwarded: a refusal's line, marked "enforced": false.
func (b *logBatch) observed(method, tool string, d *gate.Decision) {
	b.denied(method, tool, d)
	b.lines[len(b.lines)-1].unenforced = true
}

// settled adds an allowed call's line.
func (b *logBatch) settled(method, tool string, d *gate.Decision, cost int64, upstream time.Duration, outcome string, released bool) {
	l := newCallLine(method, tool, d, cost)
	l.settled, l.upstream, l.outcome, l.released, l.unauthenticated = true, upstream, outcome, released, d.Unauthenticated
	b.lines = append(b.lines, l)
}

func newCallLine(method, tool string, d *gate.Decision, cost int64) callLine {
	l := callLine{method: method, tool: tool, allowed: d.Allowed, reason: "granted", cost: cost, latency: d.Latency}
	switch {
	case d.Denial != nil:
		l.reason = string(d.Denial.Type)
	case d.Unauthenticated:
		l.reason = "unauthenticated"
	}
	if d.Scope != nil {
		l.delegation = d.Scope.DelegationID
	}
	return l
}

// lineWriter is a core that takes whole encoded lines (*logline.Core).
type lineWriter interface {
	WriteLines([]byte) error
	Start(b []byte, level zapcore.Level, t time.Time, msg string) []byte
}

// writeTo logs every line at info level as "decision" and empties the
// batch. The lines are written together, stamped with one reading of the
// clock. A logline.Core gets them encoded here, in one write; any other
// core gets them one by one as zap fields.
func (b *logBatch) writeTo(log *zap.Logger) { b.writeAt(log, time.Now()) }

func (b *logBatch) writeAt(log *zap.Logger, now time.Time) {
	if len(b.lines) == 0 {
		return
	}
	core := log.Core()
	if w, ok := core.(lineWriter); ok {
		if core.Enabled(zapcore.InfoLevel) {
			// Every line of the batch starts the same: encoded once.
			b.start = w.Start(b.start[:0], zapcore.InfoLevel, now, "decision")
			buf := b.buf[:0]
			for i := range b.lines {
				buf = b.lines[i].appendJSON(b.start, buf)
			}
			_ = w.WriteLines(buf)
			b.buf = buf
		}
	} else {
		for i := range b.lines {
			if ce := core.Check(zapcore.Entry{Level: zapcore.InfoLevel, Time: now, Message: "decision"}, nil); ce != nil {
				b.fields = b.lines[i].appendFields(b.fields[:0])
				ce.Write(b.fields...)
			}
		}
		clear(b.fields)
	}
	clear(b.lines) // let go of the strings the lines hold
	b.lines = b.lines[:0]
}

// appendFields and appendJSON write the same members in the same order:
// tool (for tools/call; for another method, method and target), allowed, reason, delegation ("" when no token verified), cost and
// latency; then a refused call's detail (and enforced, false, when observe
// mode forwarded it), or an allowed call's upstream_latency, outcome,
// released and unauthenticated (the last two only when true).
func (l *callLine) appendFields(f []zap.Field) []zap.Field {
	if l.method == "" || l.method == gate.MethodToolsCall {
		f = append(f, zap.String("tool", l.tool))
	} else {
		f = append(f, zap.String("method", l.method), zap.String("target", l.tool))
	}
	f = append(f, zap.Bool("allowed", l.allowed), zap.String("reason", l.reason),
		zap.String("delegation", l.delegation), zap.Int64("cost", l.cost), zap.Duration("latency", l.latency))
	if !l.settled {
		f = append(f, zap.String("detail", l.detail))
		if l.unenforced {
			f = append(f, zap.Bool("enforced", false))
		}
		return f
	}
	f = append(f, zap.Duration("upstream_latency", l.upstream), zap.String("outcome", l.outcome))
	if l.released {
		f = append(f, zap.Bool("released", true))
	}
	if l.unauthenticated {
		f = append(f, zap.Bool("unauthenticated", true))
	}
	return f
}

// appendJSON adds the line to b: start (the batch's Start), then the
// members, their names written as constants (logline.String and its kind
// would quote each name again for every line).
func (l *callLine) appendJSON(start, b []byte) []byte {
	b = append(b, start...)
	if l.method == "" || l.method == gate.MethodToolsCall {
		b = logline.Quote(append(b, `,"tool":`...), l.tool)
	} else {
		b = logline.Quote(append(b, `,"method":`...), l.method)
		b = logline.Quote(append(b, `,"target":`...), l.tool)
	}
	b = strconv.AppendBool(append(b, `,"allowed":`...), l.allowed)
	b = logline.Quote(append(b, `,"reason":`...), l.reason)
	b = logline.Quote(append(b, `,"delegation":`...), l.delegation)
	b = strconv.AppendInt(append(b, `,"cost":`...), l.cost, 10)
	b = logline.Seconds(append(b, `,"latency":`...), l.latency)
	if !l.settled {
		b = logline.Quote(append(b, `,"detail":`...), l.detail)
		if l.unenforced {
			b = append(b, `,"enforced":false`...)
		}
		return logline.End(b)
	}
	b = logline.Seconds(append(b, `,"upstream_latency":`...), l.upstream)
	b = logline.Quote(append(b, `,"outcome":`...), l.outcome)
	if l.released {
		b = append(b, `,"released":true`...)
	}
	if l.unauthenticated {
		b = append(b, `,"unauthenticated":true`...)
	}
	return logline.End(b)
}
