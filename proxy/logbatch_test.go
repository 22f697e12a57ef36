package proxy

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/logline"
	"github.com/delegateos/delegateos/policy"
)

// Some decisions of each kind.
var (
	granted = &gate.Decision{Allowed: true, Call: policy.Call{Cost: 5}, Scope: &dct.AuthorizedScope{DelegationID: "del_a"}, Latency: 1500}
	anon    = &gate.Decision{Allowed: true, Unauthenticated: true, Latency: 2 * time.Microsecond}
	refused = &gate.Decision{Call: policy.Call{Cost: 7}, Denial: &gate.Denial{Type: dct.BudgetExceeded, Detail: "spent 10 of \"10\"\n"}, Latency: 999}
)

func fillBatch(b *logBatch) {
	b.denied("tools/call", "a", refused)
	b.settled("tools/call", "b", granted, 5, 3*time.Millisecond, outcomeResult, false)
	b.settled("tools/call", "c\x00é\xff", granted, 0, time.Second, outcomeError, true)
	b.settled("tools/call", "d", anon, 0, 12345, outcomeUnanswered, false)
	b.settled("tools/call", "e", anon, 0, 0, outcomeNotForwarded, true)
	b.observed("resources/read", "file:///f", refused)
}

// Lines come out in the order they were added, each with its own members,
// and reusing the batch does not change what was logged before.
func TestLogBatch(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	var b logBatch
	b.denied("tools/call", "a", refused)
	b.settled("tools/call", "b", granted, 5, 3*time.Millisecond, outcomeResult, false)
	if b.len() != 2 {
		t.Fatalf("len = %d", b.len())
	}
	b.writeTo(log)
	if b.len() != 0 {
		t.Fatalf("len after writing = %d", b.len())
	}
	b.settled("tools/call", "c", anon, 0, 0, outcomeError, true)
	b.observed("prompts/get", "p", refused)
	b.writeTo(log)
	want := []map[string]any{
		{"tool": "a", "allowed": false, "reason": "budget_exceeded", "delegation": "", "cost": int64(7), "latency": time.Duration(999), "detail": "spent 10 of \"10\"\n"},
		{"tool": "b", "allowed": true, "reason": "granted", "delegation": "del_a", "cost": int64(5), "latency": time.Duration(1500), "upstream_latency": 3 * time.Millisecond, "outcome": "result"},
		{"tool": "c", "allowed": true, "reason": "unauthenticated", "delegation": "", "cost": int64(0), "latency": 2 * time.Microsecond, "upstream_latency": time.Duration(0), "outcome": "error", "released": true, "unauthenticated": true},
		{"method": "prompts/get", "target": "p", "allowed": false, "reason": "budget_exceeded", "delegation": "", "cost": int64(7), "latency": time.Duration(999), "detail": "spent 10 of \"10\"\n", "enforced": false},
	}
	got := logs.AllUntimed()
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i, w := range want {
		m := got[i].ContextMap()
		if got[i].Message != "decision" || len(m) != len(w) {
			t.Errorf("line %d = %q %v, want %v", i, got[i].Message, m, w)
			continue
		}
		for k, v := range w {
			if m[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, m[k], v)
			}
		}
	}
}

// The lines a logline.Core takes whole are, byte for byte, what zap writes
// through logline's encoder from the same lines as fields; a disabled
// level writes nothing.
func TestLogBatchEncodesLikeZap(t *testing.T) {
	now := time.Date(2026, 11, 22, 3, 4, 5, 678_900_000, time.UTC)
	var whole, fields bytes.Buffer
	var b logBatch
	fillBatch(&b)
	b.writeAt(zap.New(logline.NewCore(zapcore.AddSync(&whole), zapcore.InfoLevel)), now)
	fillBatch(&b)
	b.writeAt(zap.New(zapcore.NewCore(logline.NewEncoder(), zapcore.AddSync(&fields), zapcore.InfoLevel)), now)
	if whole.String() != fields.String() {
		t.Fatalf("encoded here:\n%s\nby zap:\n%s", whole.String(), fields.String())
	}
	lines := bytes.Split(bytes.TrimSuffix(whole.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != 6 {
		t.Fatalf("%d lines:\n%s", len(lines), whole.String())
	}
	var first map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil || first["ts"] != "2026-11-22T03:04:05.678Z" || first["latency"] != 9.99e-07 || first["enforced"] != nil {
		t.Fatalf("first line %v (%v)", first, err)
	}
	var last map[string]any
	if err := json.Unmarshal(lines[5], &last); err != nil || last["enforced"] != false || last["allowed"] != false || last["target"] != "file:///f" {
		t.Fatalf("observed line %v (%v)", last, err)
	}
	var quiet bytes.Buffer
	fillBatch(&b)
	b.writeAt(zap.New(logline.NewCore(zapcore.AddSync(&quiet), zapcore.WarnLevel)), now)
	if quiet.Len() != 0 || b.len() != 0 {
		t.Fatalf("at warn level: %q, %d lines left", quiet.String(), b.len())
	}
}

// A session's logger (With a session field, as serve gives each relay)
// still takes the lines whole, and writes what zap writes with the same
// context.
func TestLogBatchWithContextEncodesLikeZap(t *testing.T) {
	now := time.Date(2026, 11, 22, 3, 4, 5, 678_900_000, time.UTC)
	var whole, fields bytes.Buffer
	var b logBatch
	ctx := []zap.Field{zap.String("session", "1dc98c6b"), zap.Int("n", 3)}
	log := zap.New(logline.NewCore(zapcore.AddSync(&whole), zapcore.InfoLevel)).With(ctx...)
	if _, ok := log.Core().(lineWriter); !ok {
		t.Fatalf("a logger with context fields lost the whole-line path: %T", log.Core())
	}
	fillBatch(&b)
	b.writeAt(log, now)
	fillBatch(&b)
	b.writeAt(zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(logline.Config()), zapcore.AddSync(&fields), zapcore.InfoLevel)).With(ctx...), now)
	if whole.String() != fields.String() {
		t.Fatalf("encoded here:\n%s\nby zap:\n%s", whole.String(), fields.String())
	}
	if !bytes.Contains(whole.Bytes(), []byte(`"msg":"decision","session":"1dc98c6b","n":3,"tool":"a"`)) {
		t.Fatalf("no context fields:\n%s", whole.String())
	}
}

// BenchmarkLogBatch is a pump's batch of 32 settled calls' lines written
// to a logline.Core, as a burst of pipelined calls logs them (ns per line).
func BenchmarkLogBatch(b *testing.B) {
	log := zap.New(logline.NewCore(zapcore.AddSync(discard{}), zapcore.InfoLevel))
	var lb logBatch
	b.ReportAllocs()
	for b.Loop() {
		for range 32 {
			lb.settled("tools/call", "echo", granted, 5, 38*time.Microsecond, outcomeResult, false)
		}
		lb.writeTo(log)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/line")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
