package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/delegateos/delegateos/internal/logline"
)

// countingWriter counts the writes made to it.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.Buffer.Write(p)
}

// A burst of log lines (200 KiB here, a second of a busy relay's lines
// being 45 MB) reaches the log in one write when it is flushed, not in one
// write per 32 KiB: each write to the file wakes the runtime's monitor.
// Nothing is lost or reordered.
func TestLogSinkWritesBursts(t *testing.T) {
	out := &countingWriter{}
	sink := newLogSink(out)
	// As if the timed flush were scheduled already: the test flushes
	// (the timer would flush the same way, within logFlushDelay).
	sink.pending = true
	log := zap.New(logline.NewCore(sink, zapcore.InfoLevel))
	const lines = 1000
	pad := strings.Repeat("x", 150)
	for i := range lines {
		log.Info("decision", zap.Int("n", i), zap.String("pad", pad))
	}
	if out.writes != 0 {
		t.Fatalf("%d writes before the flush (%d bytes)", out.writes, out.Len())
	}
	if err := sink.Sync(); err != nil {
		t.Fatal(err)
	}
	if out.writes != 1 {
		t.Fatalf("%d writes for %d lines, want 1", out.writes, lines)
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != lines || !strings.Contains(got[lines-1], `"n":999`) || !strings.Contains(got[0], `"n":0`) {
		t.Fatalf("%d lines written, the last %.80s", len(got), got[len(got)-1])
	}
}
