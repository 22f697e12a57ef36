// Package strictjson decodes JSON that must mean exactly one thing.
//
// encoding/json silently accepts duplicate member names (last one wins),
// matches member names case-insensitively, ignores unknown members and
// replaces invalid UTF-8. Each of those lets two parties read different
// values from the same bytes, so configuration, key and list files that
// guard authority are decoded here instead: any of them is an error.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects.
const MaxDepth = 64

// Unmarshal decodes data into v, refusing duplicate member names at any
// depth, member names that do not exactly match a field of the target
// struct, unknown members, invalid UTF-8 (raw, or escaped as an unpaired
// surrogate), nesting deeper than MaxDepth and trailing data.
func Unmarshal(data []byte, v any) error {
	if !utf8.Valid(data) {
		return errors.New("invalid UTF-8")
	}
	tree, err := parseTree(data)
	if err != nil {
		return err
	}
	if err := checkNames(tree, reflect.TypeOf(v), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

// Check reports whether data is one JSON value with valid UTF-8 (and no
// unpaired surrogate escapes), no duplicate member names and nesting within
// MaxDepth.
func Check(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("invalid UTF-8")
	}
	_, err := parseTree(data)
	return err
}

// object keeps member names in a map for the name check; values are only
// kept as far as names need checking.
type object map[string]any
type array []any

// parseTree parses data for the checks: member names (and the objects and
// arrays that hold them), duplicates, depth and surrogate escapes. Valid
// JSON (json.Valid, no allocation) is read by treeParser in one pass over
// the bytes; anything else by json.Decoder's tokens (parseTreeByTokens),
// whose error says what is wrong. Both return the same tree and the same
// refusal for valid JSON (FuzzParseTree).
func parseTree(data []byte) (any, error) {
	if !json.Valid(data) {
		return parseTreeByTokens(data)
	}
	p := treeParser{data: data}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if err := checkSurrogates(data); err != nil {
		return nil, err
	}
	return v, nil
}

// treeParser reads valid JSON (json.Valid said so: it checks no syntax)
// into a tree whose objects and arrays are those of the text and whose
// other values are nil (the name check does not look at them).
type treeParser struct {
	data []byte
	i    int
}

func (p *treeParser) ws() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// str reads the string at p.i and returns it as encoding/json decodes it
// (escapes undone, invalid UTF-8 as U+FFFD).
func (p *treeParser) str() string {
	start := p.i
	escaped := false
	for p.i++; p.data[p.i] != '"'; p.i++ {
		if p.data[p.i] == '\\' {
			escaped = true
			p.i++
		}
	}
	p.i++
	raw := p.data[start:p.i]
	if !escaped && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	json.Unmarshal(raw, &s) // valid JSON: cannot fail
	return s
}

func (p *treeParser) value(depth int) (any, error) {
	p.ws()
	switch p.data[p.i] {
	case '{':
		if depth >= MaxDepth {
			return nil, fmt.Errorf("JSON nested deeper than %d levels", MaxDepth)
		}
		p.i++
		obj := object{}
		p.ws()
		if p.data[p.i] == '}' {
			p.i++
			return obj, nil
		}
		for {
			p.ws()
			key := p.str()
			if _, dup := obj[key]; dup {
				return nil, fmt.Errorf("duplicate member %q", key)
			}
			p.ws()
			p.i++ // ':'
			val, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			obj[key] = val
			p.ws()
			c := p.data[p.i]
			p.i++ // ',' or '}'
			if c == '}' {
				return obj, nil
			}
		}
	case '[':
		if depth >= MaxDepth {
			return nil, fmt.Errorf("JSON nested deeper than %d levels", MaxDepth)
		}
		p.i++
		var arr array
		p.ws()
		if p.data[p.i] == ']' {
			p.i++
			return arr, nil
		}
		for {
			val, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, val)
			p.ws()
			c := p.data[p.i]
			p.i++ // ',' or ']'
			if c == ']' {
				return arr, nil
			}
		}
	case '"':
		for p.i++; p.data[p.i] != '"'; p.i++ {
			if p.data[p.i] == '\\' {
				p.i++
			}
		}
		p.i++
		return nil, nil
	default:
		// A number, true, false or null: up to the next delimiter.
		for p.i < len(p.data) {
			switch p.data[p.i] {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				return nil, nil
			}
			p.i++
		}
		return nil, nil
	}
}

// parseTreeByTokens is parseTree through json.Decoder's tokens (scalars
// kept as the decoder reads them).
func parseTreeByTokens(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	if err := checkSurrogates(data); err != nil {
		return nil, err
	}
	return v, nil
}

// checkSurrogates refuses a \u escape of a UTF-16 surrogate that is not half
// of a high-low pair. encoding/json reads one as U+FFFD; other
// implementations keep it or fail. data must already be valid JSON.
func checkSurrogates(data []byte) error {
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			i++
			if data[i] != 'u' {
				continue
			}
			r := hex4(data[i+1 : i+5])
			i += 4
			if !utf16.IsSurrogate(r) {
				continue
			}
			if r < 0xdc00 && i+6 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' {
				if low := hex4(data[i+3 : i+7]); 0xdc00 <= low && low <= 0xdfff {
					i += 6
					continue
				}
			}
			return fmt.Errorf("unpaired UTF-16 surrogate escape \\u%04x", r)
		}
	}
	return nil
}

// hex4 reads four hex digits that the JSON scanner has already validated.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func parseValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth >= MaxDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d levels", MaxDepth)
	}
	switch delim {
	case '{':
		obj := object{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, ok := kt.(string)
			if !ok {
				return nil, errors.New("object member name is not a string")
			}
			if _, dup := obj[key]; dup {
				return nil, fmt.Errorf("duplicate member %q", key)
			}
			val, err := parseValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			obj[key] = val
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return obj, nil
	case '[':
		var arr array
		for dec.More() {
			val, err := parseValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, val)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected %v", delim)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkNames walks the parsed tree alongside the target type and refuses an
// object member whose name is not exactly a field's JSON name (encoding/json
// would match it case-insensitively).
func checkNames(v any, t reflect.Type, path string) error {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		if reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType) {
			return nil
		}
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(object)
		if !ok {
			return nil // a type mismatch is reported by the decoder
		}
		fields := jsonFields(t)
		for name, val := range obj {
			ft, ok := fields[name]
			if !ok {
				return fmt.Errorf("unknown member %q%s", name, at(path))
			}
			if err := checkNames(val, ft, path+"."+name); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if arr, ok := v.(array); ok {
			for i, val := range arr {
				if err := checkNames(val, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if obj, ok := v.(object); ok {
			for name, val := range obj {
				if err := checkNames(val, t.Elem(), path+"."+name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func at(path string) string {
	if path == "" {
		return ""
	}
	return " at " + strings.TrimPrefix(path, ".")
}

// jsonFields maps each exported field's JSON name to its type. Embedded
// structs are not used in this project's wire types and are not flattened.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			if tag == "-" {
				continue // but `json:"-,"` names a member "-", as in encoding/json
			}
			if n, _, _ := strings.Cut(tag, ","); n != "" {
				name = n
			}
		}
		fields[name] = f.Type
	}
	return fields
}
