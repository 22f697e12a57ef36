package receipt

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// fastDecode decodes the JSON of a receipt body into b without
// encoding/json's scanner, for audit verify, which reads every line of a
// log: it takes only objects of strings, integers, booleans, lists of
// strings and flat objects of strings (what the writer writes), and
// reports false for anything else (an unknown member, null, raw JSON),
// which Parse then decodes with encoding/json. It is no check of its
// own: Parse still re-encodes what was read and compares it with data.
func fastDecode(data []byte, b Body) bool {
	// The strings decoded are taken from one copy of data: an allocation
	// per receipt rather than one per member.
	d := decoder{data: data, text: string(data)}
	v := reflect.ValueOf(b).Elem()
	return d.object(v, fieldsOf(v.Type())) && d.i == len(data)
}

// fieldIndex maps a JSON member name to its field (through embedded
// structs).
type fieldIndex map[string][]int

var fieldCache sync.Map // reflect.Type → fieldIndex

func fieldsOf(t reflect.Type) fieldIndex {
	if f, ok := fieldCache.Load(t); ok {
		return f.(fieldIndex)
	}
	out := fieldIndex{}
	var walk func(t reflect.Type, path []int)
	walk = func(t reflect.Type, path []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			p := append(append([]int(nil), path...), i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type, p)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				out[name] = p
			}
		}
	}
	walk(t, nil)
	fieldCache.Store(t, out)
	return out
}

type decoder struct {
	data []byte
	text string // data, for strings without an escape
	i    int
}

func (d *decoder) peek() byte {
	if d.i < len(d.data) {
		return d.data[d.i]
	}
	return 0
}

func (d *decoder) expect(c byte) bool {
	if d.peek() != c {
		return false
	}
	d.i++
	return true
}

// object decodes an object into the struct v.
func (d *decoder) object(v reflect.Value, fields fieldIndex) bool {
	if !d.expect('{') {
		return false
	}
	if d.expect('}') {
		return true
	}
	for {
		key, ok := d.str()
		if !ok || !d.expect(':') {
			return false
		}
		path, ok := fields[key]
		if !ok || !d.value(v.FieldByIndex(path)) {
			return false
		}
		if d.expect('}') {
			return true
		}
		if !d.expect(',') {
			return false
		}
	}
}

// value decodes one member's value into f.
func (d *decoder) value(f reflect.Value) bool {
	switch f.Kind() {
	case reflect.String:
		s, ok := d.str()
		f.SetString(s)
		return ok
	case reflect.Int64:
		n, ok := d.int()
		f.SetInt(n)
		return ok
	case reflect.Bool:
		b, ok := d.bool()
		f.SetBool(b)
		return ok
	case reflect.Pointer:
		e := f.Type().Elem()
		switch e.Kind() {
		case reflect.Bool:
			b, ok := d.bool()
			f.Set(reflect.ValueOf(&b))
			return ok
		case reflect.Struct:
			p := reflect.New(e)
			f.Set(p)
			return d.object(p.Elem(), fieldsOf(e))
		}
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.String {
			return false // raw JSON
		}
		if !d.expect('[') {
			return false
		}
		var list []string
		if !d.expect(']') {
			for {
				s, ok := d.str()
				if !ok {
					return false
				}
				list = append(list, s)
				if d.expect(']') {
					break
				}
				if !d.expect(',') {
					return false
				}
			}
		}
		f.Set(reflect.ValueOf(list))
		return true
	}
	return false
}

func (d *decoder) bool() (bool, bool) {
	switch {
	case strings.HasPrefix(string(d.data[d.i:min(d.i+5, len(d.data))]), "false"):
		d.i += 5
		return false, true
	case strings.HasPrefix(string(d.data[d.i:min(d.i+4, len(d.data))]), "true"):
		d.i += 4
		return true, true
	}
	return false, false
}

func (d *decoder) int() (int64, bool) {
	start := d.i
	if d.peek() == '-' {
		d.i++
	}
	for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
		d.i++
	}
	n, err := strconv.ParseInt(string(d.data[start:d.i]), 10, 64)
	return n, err == nil && d.i > start
}

// str decodes a JSON string (valid UTF-8, escapes as JSON allows).
func (d *decoder) str() (string, bool) {
	if !d.expect('"') {
		return "", false
	}
	start := d.i
	// Most strings hold no escape: up to the closing quote, found with
	// IndexByte, only control characters remain to refuse.
	if q := bytes.IndexByte(d.data[start:], '"'); q >= 0 {
		s := d.data[start : start+q]
		if bytes.IndexByte(s, '\\') < 0 {
			for _, c := range s {
				if c < 0x20 {
					return "", false
				}
			}
			if !utf8.Valid(s) {
				return "", false
			}
			d.i = start + q + 1
			return d.text[start : start+q], true
		}
	}
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			s := d.data[start:d.i]
			d.i++
			if !utf8.Valid(s) {
				return "", false
			}
			return d.text[start : d.i-1], true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		}
		d.i++
	}
	return "", false
}

// escaped decodes the rest of a string holding an escape, from start.
func (d *decoder) escaped(start int) (string, bool) {
	out := append([]byte(nil), d.data[start:d.i]...)
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			d.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.data) {
			return "", false
		}
		e := d.data[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// A pair, or U+FFFD as encoding/json decodes a lone one.
				if d.i+6 <= len(d.data) && d.data[d.i] == '\\' && d.data[d.i+1] == 'u' {
					save := d.i
					d.i += 2
					if r2, ok := d.hex4(); ok {
						if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
							out = utf8.AppendRune(out, p)
							continue
						}
					}
					d.i = save
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(d.data[d.i:d.i+4]), 16, 32)
	d.i += 4
	return rune(n), err == nil
}
