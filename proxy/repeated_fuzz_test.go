package proxy

import (
	"bytes"
	"encoding/json"
	"testing"
)

// repeatedByDecoder is repeatedMember by encoding/json's tokenizer: it
// reports whether some object of a valid JSON value gives a member twice
// (names compared decoded and exactly).
func repeatedByDecoder(v []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(v))
	type level struct {
		object bool
		names  map[string]bool
		key    bool // the next token in an object is a name
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return false
				}
				continue
			}
			name := tok.(string)
			if top.names[name] {
				return true
			}
			top.names[name] = true
			top.key = false
			continue
		}
		if top != nil && top.object {
			top.key = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, names: map[string]bool{}, key: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
		}
		if len(stack) == 0 {
			return false
		}
	}
}

// FuzzRepeatedMember: for every valid JSON value, repeatedMember finds a
// repeated member exactly when encoding/json's tokenizer shows one.
func FuzzRepeatedMember(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":1,"b":1}}`, `[{"x":1},{"x":1}]`, `{"to":1,"t\u006f":2}`, `{"a":1,"A":2}`,
		`{"content":[{"type":"text","text":"ok","text":"no"}]}`, `"s"`, `1e400`, `{"\ud800":1,"\udfff":2}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !json.Valid(v) || bytes.Count(v, []byte("["))+bytes.Count(v, []byte("{")) > maxNesting {
			return
		}
		_, found, tooDeep := repeatedMember(v)
		if tooDeep {
			t.Fatalf("%q: too deep", v)
		}
		if want := repeatedByDecoder(v); found != want {
			t.Fatalf("%q: repeatedMember found %v, encoding/json's tokens %v", v, found, want)
		}
	})
}
