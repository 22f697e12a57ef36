package logline

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapLine is what zap's own JSON encoder writes for the same entry.
func zapLine(t testing.TB, ent zapcore.Entry, fields []zapcore.Field) string {
	t.Helper()
	b, err := zapcore.NewJSONEncoder(Config()).EncodeEntry(ent, fields)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	return b.String()
}

func ourLine(t testing.TB, enc zapcore.Encoder, ent zapcore.Entry, fields []zapcore.Field) string {
	t.Helper()
	b, err := enc.EncodeEntry(ent, fields)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	return b.String()
}

var awkward = []string{
	"", "echo", "read_file", `quote " and \ backslash`, "line\nbreak\r\ttab", "\x00\x01\x1f\x7f",
	"é ü 日本 🦀", "\xff\xfe invalid", "bad \xe2\x82 end", "\u2028\u2029\u0085", "<script>&amp;</script>",
	"del_a1b2c3d4e5f6", "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
}

var durations = []time.Duration{
	0, 1, 9, 10, 999, 1000, 12345, 1_000_000, time.Second, 1500 * time.Millisecond,
	time.Second + 1, 59*time.Minute + 999999999, 1e15 - 1, 1e15, 1e15 + 1, 1<<62 + 12345,
	-1, -12345, -time.Second, -1e15 + 1, -1e15, -1 << 63, 1<<63 - 1,
}

// randomEntry builds an entry of the kind the fast path takes.
func randomEntry(r *rand.Rand) (zapcore.Entry, []zapcore.Field) {
	levels := []zapcore.Level{zapcore.DebugLevel, zapcore.InfoLevel, zapcore.WarnLevel, zapcore.ErrorLevel, zapcore.Level(42)}
	zones := []*time.Location{time.UTC, time.FixedZone("plus", 5*3600+30*60), time.FixedZone("minus", -7*3600), time.Local}
	at := time.Unix(r.Int64N(4_000_000_000), r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
	ent := zapcore.Entry{Level: levels[r.IntN(len(levels))], Time: at, Message: awkward[r.IntN(len(awkward))]}
	var fields []zapcore.Field
	for range r.IntN(9) {
		key := awkward[r.IntN(len(awkward))]
		switch r.IntN(11) {
		case 0, 1:
			fields = append(fields, zap.String(key, awkward[r.IntN(len(awkward))]))
		case 2:
			fields = append(fields, zap.Bool(key, r.IntN(2) == 1))
		case 3:
			fields = append(fields, zap.Int64(key, int64(r.Uint64())))
		case 4:
			fields = append(fields, zap.Int32(key, int32(r.Uint32())), zap.Int16(key, int16(r.Uint32())), zap.Int8(key, int8(r.Uint32())))
		case 5:
			fields = append(fields, zap.Uint64(key, r.Uint64()), zap.Uint32(key, r.Uint32()), zap.Uint16(key, uint16(r.Uint32())), zap.Uint8(key, uint8(r.Uint32())), zap.Uintptr(key, uintptr(r.Uint64())))
		case 6:
			fields = append(fields, zap.Duration(key, durations[r.IntN(len(durations))]))
		case 7:
			fields = append(fields, zap.Duration(key, time.Duration(r.Int64N(2e15)-1e15)))
		case 8:
			fields = append(fields, zap.Duration(key, time.Duration(r.Uint64())))
		case 9:
			fields = append(fields, zap.Skip(), zap.Int(key, r.IntN(100)))
		case 10:
			fields = append(fields, zap.Int64(key, 0), zap.Duration(key, time.Duration(r.Int64N(1e6))))
		}
	}
	return ent, fields
}

// TestSameAsZap: for every entry the fast path takes, the line is zap's
// JSON encoder's, byte for byte.
func TestSameAsZap(t *testing.T) {
	enc := NewEncoder()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		ent, fields := randomEntry(r)
		if got, want := ourLine(t, enc, ent, fields), zapLine(t, ent, fields); got != want {
			t.Fatalf("entry %d:\n got %s\nwant %s", i, got, want)
		}
	}
	for _, d := range durations {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now(), Message: "d"}
		fields := []zapcore.Field{zap.Duration("latency", d)}
		if got, want := ourLine(t, enc, ent, fields), zapLine(t, ent, fields); got != want {
			t.Errorf("duration %d:\n got %s\nwant %s", d, got, want)
		}
	}
}

// TestTimeCache: consecutive entries within one second, across a second,
// and back in time, in different zones, each get their own time.
func TestTimeCache(t *testing.T) {
	enc := NewEncoder()
	base := time.Date(2026, 11, 22, 2, 29, 59, 998_000_000, time.UTC)
	plus := time.FixedZone("plus", 3600)
	for _, at := range []time.Time{
		base, base.Add(time.Millisecond), base.Add(2 * time.Millisecond), base.Add(-time.Hour),
		base.In(plus), base.Add(time.Millisecond).In(plus), base, time.Date(12000, 1, 1, 0, 0, 0, 5e6, time.UTC),
		time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC), base,
	} {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: at, Message: "m"}
		if got, want := ourLine(t, enc, ent, nil), zapLine(t, ent, nil); got != want {
			t.Errorf("%v:\n got %s\nwant %s", at, got, want)
		}
	}
}

// TestGeneralPath: entries the fast path does not take (context fields,
// a logger name, a caller, a stack, other field types, no time) are still
// encoded, by zap's encoder.
func TestGeneralPath(t *testing.T) {
	var out bytes.Buffer
	log := zap.New(zapcore.NewCore(NewEncoder(), zapcore.AddSync(&out), zapcore.DebugLevel))
	log.With(zap.String("session", "s1")).Info("with context", zap.Int("n", 1))
	log.Named("sub").Info("named")
	log.WithOptions(zap.AddCaller()).Info("with caller")
	log.Info("error field", zap.Error(errors.New("boom")))
	log.Info("float", zap.Float64("f", 0.25))
	log.Info("plain", zap.String("k", "v"))
	lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != 6 {
		t.Fatalf("%d lines:\n%s", len(lines), out.Bytes())
	}
	for i, want := range []string{`"session":"s1","n":1}`, `"logger":"sub"`, `"caller":"logline/`, `"error":"boom"}`, `"f":0.25}`, `"msg":"plain","k":"v"}`} {
		if !bytes.Contains(lines[i], []byte(want)) {
			t.Errorf("line %d lacks %s: %s", i, want, lines[i])
		}
	}
	// A stack and a zero time.
	ent := zapcore.Entry{Level: zapcore.ErrorLevel, Message: "no time", Stack: "goroutine 1"}
	if got, want := ourLine(t, NewEncoder(), ent, nil), zapLine(t, ent, nil); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func FuzzSameAsZap(f *testing.F) {
	f.Add("decision", "echo", int64(12345), int64(1), "\xff\"\\\n", int64(1_700_000_000_123_456_789))
	f.Add("", "", int64(-1), int64(0), "", int64(0))
	enc := NewEncoder()
	f.Fuzz(func(t *testing.T, msg, s string, d, n int64, key string, at int64) {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Unix(0, at).UTC(), Message: msg}
		fields := []zapcore.Field{zap.String(key, s), zap.Duration("latency", time.Duration(d)), zap.Int64("cost", n), zap.Bool(s, n%2 == 0)}
		if got, want := ourLine(t, enc, ent, fields), zapLine(t, ent, fields); got != want {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

// BenchmarkDecisionLine compares the proxy's per-call line through this
// encoder and through zap's, in one run.
func BenchmarkDecisionLine(b *testing.B) {
	fields := []zapcore.Field{
		zap.String("tool", "echo"), zap.Bool("allowed", true), zap.String("reason", "granted"),
		zap.String("delegation", "del_a1b2c3d4e5f6"), zap.Int64("cost", 0), zap.Duration("latency", 12345*time.Nanosecond),
	}
	for _, c := range []struct {
		name string
		enc  zapcore.Encoder
	}{{"logline", NewEncoder()}, {"zap", zapcore.NewJSONEncoder(Config())}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf, err := c.enc.EncodeEntry(zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now(), Message: "decision"}, fields)
				if err != nil {
					b.Fatal(err)
				}
				buf.Free()
			}
		})
	}
}

// TestWithSameAsZap: a Core's With keeps the fast path for fields of the
// types it writes, and every entry through it, fast or general, is what
// zap's JSON encoder writes with the same context.
func TestWithSameAsZap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		_, ctx := randomEntry(r)
		_, ctx2 := randomEntry(r)
		if i%7 == 0 {
			ctx2 = append(ctx2, zap.Error(errors.New("not simple")))
		}
		var ours, theirs bytes.Buffer
		core := zapcore.Core(NewCore(zapcore.AddSync(&ours), zapcore.DebugLevel))
		zcore := zapcore.NewCore(zapcore.NewJSONEncoder(Config()), zapcore.AddSync(&theirs), zapcore.DebugLevel)
		core, zcore = core.With(ctx).With(ctx2), zcore.With(ctx).With(ctx2)
		if _, fast := core.(*Core); fast != (i%7 != 0) {
			t.Fatalf("entry %d: With returned %T", i, core)
		}
		ent, fields := randomEntry(r)
		if i%5 == 0 {
			fields = append(fields, zap.Float64("f", 0.5))
		}
		for _, c := range []zapcore.Core{core, zcore} {
			if err := c.Write(ent, fields); err != nil {
				t.Fatal(err)
			}
		}
		if ours.String() != theirs.String() {
			t.Fatalf("entry %d:\n got %s\nwant %s", i, ours.String(), theirs.String())
		}
	}
}
