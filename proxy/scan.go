package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
	params  []byte // raw JSON of params, nil if absent (read only when every member is)
}

var errScan = errors.New("not a JSON-RPC message")

// errAmbiguous is a message that its recipient could read differently from
// the relay: a JSON-RPC member given twice, or a member whose name differs
// from one only in case (encoding/json, which most Go MCP servers decode
// with, matches names case-insensitively and takes the last).
var errAmbiguous = errors.New("a JSON-RPC member is given twice or spelt with other letter case")

// rpcMembers are the members of a JSON-RPC message.
var rpcMembers = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// scanHeader reads the top-level members of a JSON object far enough to
// classify it; on error, the method and id found so far are still set, so
// the start of a truncated frame can be answered.
//
// scanHeader reads the top-level members of a JSON object far enough to
// classify it. It stops as soon as the message is classified, so a large
// result is never walked. Values it skips are checked for balanced
// structure and well-formed strings only; the relay passes frames on as
// they are and leaves full validation to their recipient.
func scanHeader(b []byte) (header, error) { return scanMessage(b, false) }

// scanClientHeader is scanHeader for a frame from the client, which the
// gate must classify exactly as the upstream will: every member is read,
// names are compared after decoding escapes, and a JSON-RPC member given
// twice or in other letter case is errAmbiguous. Otherwise a frame could
// show the relay a response or a harmless method while the upstream reads
// a tools/call.
func scanClientHeader(b []byte) (header, error) { return scanMessage(b, true) }

func scanMessage(b []byte, strict bool) (header, error) {
	var h header
	var seen [len(rpcMembers)]bool
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
		if strict {
			name, ok := unquote(key)
			if !ok {
				return h, errScan
			}
			for i, m := range rpcMembers {
				if strings.EqualFold(name, m) {
					if name != m || seen[i] {
						return h, errAmbiguous
					}
					seen[i] = true
				}
			}
			if bytes.IndexByte(key, '\\') >= 0 {
				key = []byte(strconv.Quote(name)) // match the cases below by value
			}
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
		case `"params"`:
			if !s.skip(0) {
				return h, errScan
			}
			h.params = b[start:s.i]
		case `"result"`, `"error"`:
			hasResult = true
			h.isError = string(key) == `"error"`
			if hasID && !strict {
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

// repeatedMember returns a member name that occurs twice in one object of
// the JSON value b, at any depth, where names that differ only in letter
// case count as the same (as encoding/json matches them), so that no two
// decoders can read different values from b. ok is false if b is not
// well formed.
func repeatedMember(b []byte) (name string, ok bool) {
	s := scanner{b: b}
	s.ws()
	name, ok = s.names(0)
	if !ok || name != "" {
		return name, ok
	}
	s.ws()
	return "", s.i == len(b)
}

// names consumes one value and returns the first repeated member name in
// it, or "".
func (s *scanner) names(depth int) (string, bool) {
	if depth > maxNesting || s.i >= len(s.b) {
		return "", false
	}
	switch s.b[s.i] {
	case '{':
		s.i++
		s.ws()
		if s.eat('}') {
			return "", true
		}
		seen := map[string]bool{}
		for {
			s.ws()
			raw, ok := s.str()
			if !ok {
				return "", false
			}
			name, ok := unquote(raw)
			if !ok {
				return "", false
			}
			f := foldName(name)
			if seen[f] {
				return name, true
			}
			seen[f] = true
			s.ws()
			if !s.eat(':') {
				return "", false
			}
			s.ws()
			if dup, ok := s.names(depth + 1); !ok || dup != "" {
				return dup, ok
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			return "", s.eat('}')
		}
	case '[':
		s.i++
		s.ws()
		if s.eat(']') {
			return "", true
		}
		for {
			s.ws()
			if dup, ok := s.names(depth + 1); !ok || dup != "" {
				return dup, ok
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			return "", s.eat(']')
		}
	}
	return "", s.skip(depth)
}

// foldName maps every name that strings.EqualFold holds equal to one key:
// each rune becomes the smallest rune of its case-folding orbit.
func foldName(name string) string {
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		// 'K' < 'k' < U+212A KELVIN SIGN, 'S' < 's' < U+017F LONG S.
		return strings.ToUpper(name)
	}
	var b strings.Builder
	for _, r := range name {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
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

// eachMember calls fn with every member of the object obj, its name
// decoded; it reports false if obj is not a well-formed object.
func eachMember(obj []byte, fn func(name string, val []byte)) bool {
	s := scanner{b: obj}
	s.ws()
	if !s.eat('{') {
		return false
	}
	s.ws()
	if s.eat('}') {
		s.ws()
		return s.i == len(obj)
	}
	for {
		s.ws()
		k, ok := s.str()
		if !ok {
			return false
		}
		name, ok := unquote(k)
		if !ok {
			return false
		}
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		start := s.i
		if !s.skip(0) {
			return false
		}
		fn(name, obj[start:s.i])
		s.ws()
		if s.eat(',') {
			continue
		}
		if !s.eat('}') {
			return false
		}
		s.ws()
		return s.i == len(obj)
	}
}
