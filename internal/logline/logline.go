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
	"bytes"
	"strconv"
	"sync"
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
	return &encoder{Encoder: zapcore.NewJSONEncoder(Config())}
}

// encoder is zap's JSON encoder (embedded: every method but EncodeEntry
// and Clone is its) with EncodeEntry's common case done here.
type encoder struct {
	zapcore.Encoder
	// context is set on clones: zap clones the encoder to add a logger's
	// With fields, which only the embedded encoder holds, so a clone's
	// entries always go the general way.
	context bool
	// ctx is the encoding of the context fields a Core's With added (the
	// embedded encoder holds them too, for the general way).
	ctx []byte
}

var pool = buffer.NewPool()

func (e *encoder) Clone() zapcore.Encoder {
	return &encoder{Encoder: e.Encoder.Clone(), context: true}
}

// EncodeEntry writes ent and fields as one JSON line.
func (e *encoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	if e.context || ent.LoggerName != "" || ent.Caller.Defined || ent.Stack != "" || ent.Time.IsZero() || !simple(fields) {
		return e.Encoder.EncodeEntry(ent, fields)
	}
	sp := scratch.Get().(*[]byte)
	line := append(Start((*sp)[:0], ent.Level, ent.Time, ent.Message), e.ctx...)
	line = End(appendFields(line, fields))
	b := pool.Get()
	b.Write(line)
	*sp = line
	scratch.Put(sp)
	return b, nil
}

// appendFields writes fields of the types simple accepts.
func appendFields(line []byte, fields []zapcore.Field) []byte {
	for i := range fields {
		f := &fields[i]
		switch f.Type {
		case zapcore.StringType:
			line = String(line, f.Key, f.String)
		case zapcore.BoolType:
			line = Bool(line, f.Key, f.Integer == 1)
		case zapcore.Int64Type, zapcore.Int32Type, zapcore.Int16Type, zapcore.Int8Type:
			line = Int(line, f.Key, f.Integer)
		case zapcore.Uint64Type, zapcore.Uint32Type, zapcore.Uint16Type, zapcore.Uint8Type, zapcore.UintptrType:
			line = appendKey(line, f.Key)
			line = strconv.AppendUint(line, uint64(f.Integer), 10)
		case zapcore.DurationType:
			line = Duration(line, f.Key, time.Duration(f.Integer))
		}
	}
	return line
}

// scratch holds the slices EncodeEntry builds lines in.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Start begins a line in the encoder's format, for a caller that builds
// its lines itself (Core.WriteLines): the level, the time and the
// message. Fields follow (String, Bool, Int, Duration), then End.
func Start(b []byte, level zapcore.Level, t time.Time, msg string) []byte {
	b = append(b, `{"level":`...)
	b = appendString(b, level.String())
	b = append(b, `,"ts":"`...)
	b = appendTime(b, t)
	b = append(b, `","msg":`...)
	return appendString(b, msg)
}

// String adds a string field.
func String(b []byte, key, val string) []byte { return appendString(appendKey(b, key), val) }

// Bool adds a bool field.
func Bool(b []byte, key string, val bool) []byte {
	return strconv.AppendBool(appendKey(b, key), val)
}

// Int adds an integer field.
func Int(b []byte, key string, val int64) []byte {
	return strconv.AppendInt(appendKey(b, key), val, 10)
}

// Duration adds a duration field, in seconds.
func Duration(b []byte, key string, d time.Duration) []byte {
	return appendSeconds(appendKey(b, key), d)
}

// Quote adds a string value (a field's value, after its key written by
// the caller), quoted and escaped as String does.
func Quote(b []byte, val string) []byte { return appendString(b, val) }

// Seconds adds a duration value in seconds, as Duration does.
func Seconds(b []byte, d time.Duration) []byte { return appendSeconds(b, d) }

// End ends the line.
func End(b []byte) []byte { return append(b, "}\n"...) }

func appendKey(b []byte, key string) []byte {
	b = append(b, ',')
	b = appendString(b, key)
	return append(b, ':')
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

// clock is the last second appendTime formatted.
var clock atomic.Pointer[stamp]

// appendTime writes t as zapcore.ISO8601TimeEncoder does
// ("2006-01-02T15:04:05.000Z0700"), formatting the part above the
// millisecond once per second.
func appendTime(b []byte, t time.Time) []byte {
	sec, loc := t.Unix(), t.Location()
	s := clock.Load()
	if s == nil || s.sec != sec || s.loc != loc {
		whole := t.Format("2006-01-02T15:04:05.Z0700")
		dot := len("2006-01-02T15:04:05.")
		if len(whole) < dot || whole[dot-1] != '.' {
			// A year outside 0000-9999 has another width: no cache.
			return t.AppendFormat(b, "2006-01-02T15:04:05.000Z0700")
		}
		s = &stamp{sec: sec, loc: loc, prefix: whole[:dot], zone: whole[dot:]}
		clock.Store(s)
	}
	b = append(b, s.prefix...)
	ms := t.Nanosecond() / 1e6
	b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, s.zone...)
}

// appendSeconds writes d in seconds as zapcore.SecondsDurationEncoder
// does: the shortest decimal that reads back as float64(d)/1e9. Below
// 10^15 ns that decimal is d·10⁻⁹ itself (it has at most 15 significant
// digits, and distinct decimals of 15 digits are distinct doubles), so it
// is written from the integer; beyond, strconv formats the float.
func appendSeconds(b []byte, d time.Duration) []byte {
	const exact = 1e15
	if d <= -exact || d >= exact {
		return strconv.AppendFloat(b, float64(d)/float64(time.Second), 'f', -1, 64)
	}
	n := int64(d)
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	b = strconv.AppendInt(b, n/1e9, 10)
	frac := n % 1e9
	if frac == 0 {
		return b
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
	return append(b, digits[:end]...)
}

const hex = "0123456789abcdef"

// safe marks the bytes below utf8.RuneSelf that a JSON string holds as
// they are.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString writes s quoted as zap's JSON encoder does: '"' and '\'
// escaped, control characters as \n, \r, \t or \u00XX, invalid UTF-8 as
// \ufffd, everything else as it is.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[last:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			last = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size != 1 {
			i += size
			continue
		}
		b = append(b, s[last:i]...)
		b = append(b, `\ufffd`...)
		i++
		last = i
	}
	b = append(b, s[last:]...)
	return append(b, '"')
}

// Core is a zapcore.Core with this package's encoder that also takes lines
// a caller built itself (Start … End), so that a hot path can write many
// lines in one go: WriteLines.
type Core struct {
	zapcore.Core
	out  zapcore.WriteSyncer
	enab zapcore.LevelEnabler
	enc  *encoder
}

// NewCore returns a Core writing to out the entries enab enables.
func NewCore(out zapcore.WriteSyncer, enab zapcore.LevelEnabler) *Core {
	enc := &encoder{Encoder: zapcore.NewJSONEncoder(Config())}
	return &Core{Core: zapcore.NewCore(enc, out, enab), out: out, enab: enab, enc: enc}
}

// With adds context fields. Fields of the types the fast path writes
// keep it (a logger per session, say, still writes its lines here and
// takes WriteLines); any other goes to zap's core, and the general way.
func (c *Core) With(fields []zapcore.Field) zapcore.Core {
	if !simple(fields) {
		return c.Core.With(fields)
	}
	enc := &encoder{Encoder: c.enc.Encoder.Clone(), ctx: appendFields(bytes.Clone(c.enc.ctx), fields)}
	for i := range fields {
		fields[i].AddTo(enc.Encoder)
	}
	return &Core{Core: zapcore.NewCore(enc, c.out, c.enab), out: c.out, enab: c.enab, enc: enc}
}

// Start is the package's Start followed by the core's context fields:
// how a line for WriteLines begins.
func (c *Core) Start(b []byte, level zapcore.Level, t time.Time, msg string) []byte {
	return append(Start(b, level, t, msg), c.enc.ctx...)
}

// WriteLines writes complete lines, as Start … End built them. The caller
// checks Enabled first.
func (c *Core) WriteLines(p []byte) error {
	_, err := c.out.Write(p)
	return err
}
