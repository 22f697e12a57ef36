package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
)

// kind classifies a JSON-RPC message by its members.
type kind int

const (
	kindInvalid      kind = iota
	kindRequest           // method and id
	kindNotification      // method, no id
	kindResponse          // result or error, and id
)

// header is what the relay needs from a frame: its kind, method and id,
// and where the id sits so errors can reuse it verbatim.
type header struct {
	kind    kind
	method  string
	id      []byte // raw JSON of the id, nil if absent
	isError bool   // a response carrying "error"
}

var errScan = errors.New("not a JSON-RPC message")

// scanHeader reads the top-level members of a JSON object far enough to
// classify it; on error, the method and id found so far are still set, so
// the start of a truncated frame can be answered.
//
// scanHeader reads the top-level members of a JSON object far enough to
// classify it. It stops as soon as the message is classified, so a large
// result is never walked. Values it skips are checked for balanced
// structure and well-formed strings only; the relay passes frames on as
// they are and leaves full validation to their recipient.
func scanHeader(b []byte) (header, error) {
	var h header
	s := scanner{b: b}
	s.ws()
	if !s.eat('{') {
		return h, errScan
	}
	hasMethod, hasID, hasResult := false, false, false
	s.ws()
	if s.eat('}') {
		return h, errScan
	}
	for {
		s.ws()
		key, ok := s.str()
		if !ok {
			return h, errScan
		}
		s.ws()
		if !s.eat(':') {
			return h, errScan
		}
		s.ws()
		start := s.i
		switch string(key) {
		case `"method"`:
			raw, ok := s.str()
			if !ok {
				return h, errScan
			}
			m, ok := unquote(raw)
			if !ok {
				return h, errScan
			}
			h.method, hasMethod = m, true
		case `"id"`:
			if !s.skip(0) {
				return h, errScan
			}
			h.id, hasID = b[start:s.i], true
		case `"result"`, `"error"`:
			hasResult = true
			h.isError = string(key) == `"error"`
			if hasID {
				// A response: nothing after the id matters to the relay.
				h.kind = kindResponse
				return h, nil
			}
			if !s.skip(0) {
				return h, errScan
			}
		default:
			if !s.skip(0) {
				return h, errScan
			}
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			break
		}
		return h, errScan
	}
	s.ws()
	if s.i != len(b) {
		return h, errScan
	}
	switch {
	case hasMethod && hasResult:
		return h, errScan
	case hasMethod && hasID:
		h.kind = kindRequest
	case hasMethod:
		h.kind = kindNotification
	case hasResult && hasID:
		h.kind = kindResponse
	default:
		return h, errScan
	}
	return h, nil
}

// maxNesting bounds skip's recursion on hostile input.
const maxNesting = 512

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str consumes a string and returns it with its quotes.
func (s *scanner) str() ([]byte, bool) {
	start := s.i
	if !s.eat('"') {
		return nil, false
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start:s.i], true
		case c == '\\':
			s.i += 2
		case c < 0x20:
			return nil, false
		default:
			s.i++
		}
	}
	return nil, false
}

// skip consumes one value.
func (s *scanner) skip(depth int) bool {
	if depth > maxNesting || s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; c {
	case '"':
		_, ok := s.str()
		return ok
	case '{', '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		s.i++
		s.ws()
		if s.eat(end) {
			return true
		}
		for {
			s.ws()
			if c == '{' {
				if _, ok := s.str(); !ok {
					return false
				}
				s.ws()
				if !s.eat(':') {
					return false
				}
				s.ws()
			}
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			return s.eat(end)
		}
	default:
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return s.i > start && literalOK(s.b[start:s.i])
			}
			s.i++
		}
		return s.i > start && literalOK(s.b[start:s.i])
	}
}

func literalOK(v []byte) bool {
	switch string(v) {
	case "true", "false", "null":
		return true
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			return false
		}
	}
	return true
}

// idKey normalizes an id for matching a response to its request: string
// ids by their value, numbers by their text.
func idKey(raw []byte) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	if raw[0] == '"' {
		s, ok := unquote(raw)
		if !ok {
			return "", false
		}
		return "s" + s, true
	}
	return "n" + string(raw), true
}

// unquote decodes a JSON string (with its quotes).
func unquote(raw []byte) (string, bool) {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// resultMember returns the raw value of result.<name> in a response frame,
// skipping everything else, or nil.
func resultMember(b []byte, name string) []byte {
	s := scanner{b: b}
	s.ws()
	if !s.eat('{') {
		return nil
	}
	if v := s.member(`"result"`); v != nil {
		r := scanner{b: v}
		r.ws()
		if r.eat('{') {
			return r.member(`"` + name + `"`)
		}
	}
	return nil
}

// member scans the members of the object whose '{' was just consumed and
// returns the raw value of the one named key (quoted), or nil.
func (s *scanner) member(key string) []byte {
	s.ws()
	if s.eat('}') {
		return nil
	}
	for {
		s.ws()
		k, ok := s.str()
		if !ok {
			return nil
		}
		s.ws()
		if !s.eat(':') {
			return nil
		}
		s.ws()
		start := s.i
		if !s.skip(0) {
			return nil
		}
		if string(k) == key {
			return s.b[start:s.i]
		}
		s.ws()
		if !s.eat(',') {
			return nil
		}
	}
}
