package proxy

import (
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logBatch holds log lines to be written later, in order. Its storage is
// reused from batch to batch: the fields of every line sit back to back in
// one slice, so that a line costs no allocation. A batch belongs to one
// goroutine.
type logBatch struct {
	msgs   []string
	ends   []int // where each line's fields end
	fields []zap.Field
}

// maxBatchedLines bounds the lines a pump holds back: a stream of frames
// that never pauses still has its lines written.
const maxBatchedLines = 256

func (b *logBatch) add(msg string, fields ...zap.Field) {
	b.fields = append(b.fields, fields...)
	b.msgs = append(b.msgs, msg)
	b.ends = append(b.ends, len(b.fields))
}

func (b *logBatch) len() int { return len(b.msgs) }

// writeTo logs every line at info level and empties the batch. The lines
// go straight to the logger's core, stamped with one reading of the clock:
// they are written together, and a per-call line is on the relay's hot
// path. Each line's fields are handed to the core as a slice of the
// batch's storage, which the next lines reuse: a zapcore.Core that keeps
// fields after Write returns must copy them (zaptest/observer does;
// encoding cores keep nothing).
func (b *logBatch) writeTo(log *zap.Logger) {
	if len(b.msgs) == 0 {
		return
	}
	core := log.Core()
	now := time.Now()
	start := 0
	for i, msg := range b.msgs {
		end := b.ends[i]
		if ce := core.Check(zapcore.Entry{Level: zapcore.InfoLevel, Time: now, Message: msg}, nil); ce != nil {
			ce.Write(b.fields[start:end:end]...)
		}
		start = end
	}
	clear(b.fields) // let go of the strings the fields hold
	b.msgs, b.ends, b.fields = b.msgs[:0], b.ends[:0], b.fields[:0]
}
