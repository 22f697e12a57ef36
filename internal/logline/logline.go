// Package logline is the format of delegateos's JSON log lines: zap's
// production keys (level, ts, msg), ISO 8601 times with milliseconds and
// durations in seconds.
//
// Its encoder writes exactly what zap's JSON encoder writes for that
// configuration, byte for byte, but encodes the common line (no logger
// name, caller, stack or context fields; string, bool, integer and
// duration fields) itself: zap's general encoder formats every time stamp
// from scratch and every duration through a float, which made logging the
// larger part of the proxy's per-call cost. Any other line is handed to
// zap's encoder.
package logline

import (
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// Config is the encoder configuration of delegateos's logs.
func Config() zapcore.EncoderConfig {
	return zapcore.EncoderConfig{
		TimeKey:        "ts",
		LevelKey:       "level",
		NameKey:        "logger",
		CallerKey:      "caller",
		FunctionKey:    zapcore.OmitKey,
		MessageKey:     "msg",
		StacktraceKey:  "stacktrace",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeLevel:    zapcore.LowercaseLevelEncoder,
		EncodeTime:     zapcore.ISO8601TimeEncoder,
		EncodeDuration: zapcore.SecondsDurationEncoder,
		EncodeCaller:   zapcore.ShortCallerEncoder,
	}
}

// NewEncoder returns the JSON encoder of Config with the fast path.
func NewEncoder() zapcore.Encoder {
	return &encoder{Encoder: zapcore.NewJSONEncoder(Config()), clock: new(atomic.Pointer[stamp])}
}

// encoder is zap's JSON encoder (embedded: every method but EncodeEntry
// and Clone is its) with EncodeEntry's common case done here.
type encoder struct {
	zapcore.Encoder
	// context is set on clones: zap clones the encoder to add a logger's
	// With fields, which only the embedded encoder holds, so a clone's
	// entries always go the general way.
	context bool
	clock   *atomic.Pointer[stamp]
}

var pool = buffer.NewPool()

func (e *encoder) Clone() zapcore.Encoder {
	return &encoder{Encoder: e.Encoder.Clone(), context: true, clock: e.clock}
}

// EncodeEntry writes ent and fields as one JSON line.
func (e *encoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	if e.context || ent.LoggerName != "" || ent.Caller.Defined || ent.Stack != "" || ent.Time.IsZero() || !simple(fields) {
		return e.Encoder.EncodeEntry(ent, fields)
	}
	b := pool.Get()
	b.AppendString(`{"level":`)
	appendString(b, ent.Level.String())
	b.AppendString(`,"ts":"`)
	e.appendTime(b, ent.Time)
	b.AppendString(`","msg":`)
	appendString(b, ent.Message)
	for i := range fields {
		f := &fields[i]
		if f.Type == zapcore.SkipType {
			continue
		}
		b.AppendByte(',')
		appendString(b, f.Key)
		b.AppendByte(':')
		switch f.Type {
		case zapcore.StringType:
			appendString(b, f.String)
		case zapcore.BoolType:
			b.AppendBool(f.Integer == 1)
		case zapcore.Int64Type, zapcore.Int32Type, zapcore.Int16Type, zapcore.Int8Type:
			b.AppendInt(f.Integer)
		case zapcore.Uint64Type, zapcore.Uint32Type, zapcore.Uint16Type, zapcore.Uint8Type, zapcore.UintptrType:
			b.AppendUint(uint64(f.Integer))
		case zapcore.DurationType:
			appendSeconds(b, time.Duration(f.Integer))
		}
	}
	b.AppendString("}\n")
	return b, nil
}

// simple reports whether every field is of a type EncodeEntry writes
// itself.
func simple(fields []zapcore.Field) bool {
	for i := range fields {
		switch fields[i].Type {
		case zapcore.StringType, zapcore.BoolType, zapcore.DurationType, zapcore.SkipType,
			zapcore.Int64Type, zapcore.Int32Type, zapcore.Int16Type, zapcore.Int8Type,
			zapcore.Uint64Type, zapcore.Uint32Type, zapcore.Uint16Type, zapcore.Uint8Type, zapcore.UintptrType:
		default:
			return false
		}
	}
	return true
}

// stamp is one second's formatted time, "2006-01-02T15:04:05." and the
// zone ("Z" or "-0700"), for one location.
type stamp struct {
	sec          int64
	loc          *time.Location
	prefix, zone string
}

// appendTime writes t as zapcore.ISO8601TimeEncoder does
// ("2006-01-02T15:04:05.000Z0700"), formatting the part above the
// millisecond once per second.
func (e *encoder) appendTime(b *buffer.Buffer, t time.Time) {
	sec, loc := t.Unix(), t.Location()
	s := e.clock.Load()
	if s == nil || s.sec != sec || s.loc != loc {
		whole := t.Format("2006-01-02T15:04:05.Z0700")
		dot := len("2006-01-02T15:04:05.")
		if len(whole) < dot || whole[dot-1] != '.' {
			// A year outside 0000-9999 has another width: no cache.
			b.AppendString(t.Format("2006-01-02T15:04:05.000Z0700"))
			return
		}
		s = &stamp{sec: sec, loc: loc, prefix: whole[:dot], zone: whole[dot:]}
		e.clock.Store(s)
	}
	b.AppendString(s.prefix)
	ms := t.Nanosecond() / 1e6
	b.AppendByte(byte('0' + ms/100))
	b.AppendByte(byte('0' + ms/10%10))
	b.AppendByte(byte('0' + ms%10))
	b.AppendString(s.zone)
}

// appendSeconds writes d in seconds as zapcore.SecondsDurationEncoder
// does: the shortest decimal that reads back as float64(d)/1e9. Below
// 10^15 ns that decimal is d·10⁻⁹ itself (it has at most 15 significant
// digits, and distinct decimals of 15 digits are distinct doubles), so it
// is written from the integer; beyond, strconv formats the float.
func appendSeconds(b *buffer.Buffer, d time.Duration) {
	const exact = 1e15
	if d <= -exact || d >= exact {
		b.AppendFloat(float64(d)/float64(time.Second), 64)
		return
	}
	n := int64(d)
	if n < 0 {
		b.AppendByte('-')
		n = -n
	}
	b.AppendInt(n / 1e9)
	frac := n % 1e9
	if frac == 0 {
		return
	}
	var digits [10]byte
	digits[0] = '.'
	for i := 9; i >= 1; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	end := 10
	for digits[end-1] == '0' {
		end--
	}
	b.Write(digits[:end])
}

const hex = "0123456789abcdef"

// appendString writes s quoted as zap's JSON encoder does: '"' and '\\'
// escaped, control characters as \n, \r, \t or \u00XX, invalid UTF-8 as
// \ufffd, everything else as it is.
func appendString(b *buffer.Buffer, s string) {
	b.AppendByte('"')
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b.AppendString(s[last:i])
			b.AppendString(`\ufffd`)
			i++
			last = i
			continue
		}
		if c >= 0x20 && c != '\\' && c != '"' {
			i++
			continue
		}
		b.AppendString(s[last:i])
		switch c {
		case '\\', '"':
			b.AppendByte('\\')
			b.AppendByte(c)
		case '\n':
			b.AppendString(`\n`)
		case '\r':
			b.AppendString(`\r`)
		case '\t':
			b.AppendString(`\t`)
		default:
			b.AppendString(`\u00`)
			b.AppendByte(hex[c>>4])
			b.AppendByte(hex[c&0xf])
		}
		i++
		last = i
	}
	b.AppendString(s[last:])
	b.AppendByte('"')
}
