package proxy

import (
	"bytes"
	"encoding/json"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Lines come out in the order they were added, each with its own fields,
// and reusing the batch does not change what was logged before.
func TestLogBatch(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	var b logBatch
	b.add("decision", zap.String("tool", "a"), zap.Int64("cost", 1))
	b.add("call settled", zap.String("tool", "b"))
	b.add("decision", zap.String("tool", "c"), zap.Bool("allowed", false), zap.Int64("cost", 3))
	if b.len() != 3 {
		t.Fatalf("len = %d", b.len())
	}
	b.writeTo(log)
	if b.len() != 0 {
		t.Fatalf("len after writing = %d", b.len())
	}
	b.add("call settled", zap.String("tool", "d"), zap.Int64("cost", 4), zap.Bool("released", true))
	b.writeTo(log)
	want := []struct {
		msg    string
		fields map[string]any
	}{
		{"decision", map[string]any{"tool": "a", "cost": int64(1)}},
		{"call settled", map[string]any{"tool": "b"}},
		{"decision", map[string]any{"tool": "c", "allowed": false, "cost": int64(3)}},
		{"call settled", map[string]any{"tool": "d", "cost": int64(4), "released": true}},
	}
	got := logs.AllUntimed()
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i, w := range want {
		m := got[i].ContextMap()
		if got[i].Message != w.msg || len(m) != len(w.fields) {
			t.Errorf("line %d = %q %v, want %q %v", i, got[i].Message, m, w.msg, w.fields)
			continue
		}
		for k, v := range w.fields {
			if m[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, m[k], v)
			}
		}
	}
}

// A batch written to an encoding core gives the same bytes as logging each
// line directly.
func TestLogBatchEncodesLikeDirectLogging(t *testing.T) {
	var direct, batched bytes.Buffer
	newLog := func(buf *bytes.Buffer) *zap.Logger {
		enc := zap.NewProductionEncoderConfig()
		enc.TimeKey = "" // the two runs log at different times
		return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(buf), zapcore.InfoLevel))
	}
	fields := func(i int) []zap.Field {
		return []zap.Field{zap.String("tool", "t"), zap.Int("i", i), zap.Duration("latency", 1500)}
	}
	d, bl := newLog(&direct), newLog(&batched)
	var b logBatch
	for i := range 5 {
		d.Info("decision", fields(i)...)
		b.add("decision", fields(i)...)
		if i%2 == 1 {
			b.writeTo(bl)
		}
	}
	b.writeTo(bl)
	if direct.String() != batched.String() {
		t.Fatalf("batched:\n%s\ndirect:\n%s", batched.String(), direct.String())
	}
	var line map[string]any
	if err := json.Unmarshal(bytes.SplitN(direct.Bytes(), []byte("\n"), 2)[0], &line); err != nil || line["latency"] != 1.5e-06 {
		t.Fatalf("first line %v (%v)", line, err)
	}
}
