package proxy

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
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
	// idAt and paramsAt are where id and params start in the frame.
	idAt, paramsAt int
	// answer is the raw JSON of a response's result or error, when every
	// member was read (strict); nil otherwise.
	answer []byte
	// paramsClean and answerClean say that scanUpstream read params or
	// the answer with the check for repeated members (repeatedMember) as
	// it went, and found it well formed with no member given twice and no
	// deeper than that check reads: paramsRepeats and answerRepeats need
	// not read it again. False says nothing: they read it.
	paramsClean, answerClean bool
}

var errScan = errors.New("not a JSON-RPC message")

// errAmbiguous is a message that its recipient could read differently from
// the relay: a JSON-RPC member given twice, or a member whose name differs
// from one only in case (encoding/json, which most Go MCP servers decode
// with, matches names case-insensitively and takes the last).
var errAmbiguous = errors.New("a JSON-RPC member is given twice or spelt with other letter case")

// rpcMembers are the members of a JSON-RPC message, and rpcMemberKeys the
// same names quoted.
var (
	rpcMembers    = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}
	rpcMemberKeys = [...][]byte{[]byte(`"jsonrpc"`), []byte(`"id"`), []byte(`"method"`), []byte(`"params"`), []byte(`"result"`), []byte(`"error"`)}
)

// rpcMember finds the JSON-RPC member that a member name (raw JSON with
// its quotes) names: i is its index in rpcMembers, or -1 if the name is
// none of them in any letter case, and exact reports whether it is spelt
// exactly so. ok is false if the name cannot be decoded.
func rpcMember(key []byte) (i int, exact, ok bool) {
	raw := key[1 : len(key)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		switch string(raw) {
		case "jsonrpc":
			return 0, true, true
		case "id":
			return 1, true, true
		case "method":
			return 2, true, true
		case "params":
			return 3, true, true
		case "result":
			return 4, true, true
		case "error":
			return 5, true, true
		}
		if isASCII(raw) {
			// Only a name of the same length can match in another case.
			for i, m := range rpcMembers {
				if len(m) == len(raw) && strings.EqualFold(string(raw), m) {
					return i, false, true
				}
			}
			return -1, false, true
		}
	}
	name, ok := unquote(key)
	if !ok {
		return -1, false, false
	}
	for i, m := range rpcMembers {
		if strings.EqualFold(name, m) {
			return i, name == m, true
		}
	}
	return -1, false, true
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// methodName decodes a method name (raw JSON with its quotes) without
// allocating for the methods a session mostly carries.
func methodName(raw []byte) (string, bool) {
	switch string(raw) {
	case `"tools/call"`:
		return "tools/call", true
	case `"tools/list"`:
		return "tools/list", true
	case `"notifications/progress"`:
		return "notifications/progress", true
	case `"notifications/cancelled"`:
		return "notifications/cancelled", true
	case `"ping"`:
		return "ping", true
	}
	return unquote(raw)
}

// scanHeader reads the top-level members of a JSON object far enough to
// classify it; on error, the method and id found so far are still set, so
// the start of a truncated frame can be answered.
//
// scanHeader reads the top-level members of a JSON object far enough to
// classify it. It stops as soon as the message is classified, so a large
// result is never walked. Values it skips are checked for balanced
// structure and well-formed strings only; the relay passes frames on as
// they are and leaves full validation to their recipient.
func scanHeader(b []byte) (header, error) { return scanMessage(b, false, false, false, false) }

// scanUpstream reads every top-level member of an upstream frame as
// strictly as scanClientHeader reads a client frame, so that the relay
// and the client read the same id and the same outcome: an id or a
// result given twice or in other letter case, or both a result and an
// error (or an error that is not an object), is errAmbiguous. Values
// are skipped however deep they nest (iteratively): a deep answer's id
// must still be read so that its call is answered, and the depth of
// params and answers is bounded by the check for repeated members
// (answerRepeats, paramsRepeats), which refuses them under that id.
//
// The check for repeated members is made in the same pass: params and the
// answer are read with it (walkClean) rather than skipped, so that an
// answer is read once; only one the check does not pass is read again,
// by the check, as before.
func scanUpstream(b []byte) (header, error) { return scanMessage(b, true, true, true, true) }

// scanClientHeader is scanHeader for a frame from the client, which the
// gate must classify exactly as the upstream will: every member is read,
// names are compared after decoding escapes, and a JSON-RPC member given
// twice or in other letter case is errAmbiguous. Otherwise a frame could
// show the relay a response or a harmless method while the upstream reads
// a tools/call. Values are skipped by their brackets and strings: the
// params the relay acts on are read again, strictly, by readCallParams,
// and a value that is not well-formed JSON fails in its recipient's
// parser as a whole frame.
func scanClientHeader(b []byte) (header, error) { return scanMessage(b, true, true, false, false) }

// scanMessage reads a frame's top-level members; strict reads them all
// (see scanClientHeader), and fast skips values by their brackets and
// strings alone (for the upstream, whose JSON is its own to get right:
// the relay only needs to find where each value ends); deep lets fast
// skip values nested deeper than maxNesting; walk reads params and a
// result or error with the check for repeated members (see scanUpstream).
func scanMessage(b []byte, strict, fast, deep, walk bool) (header, error) {
	var h header
	var seen [len(rpcMembers)]bool
	s := scanner{b: b, fast: fast, deep: deep}
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
			i, exact, ok := rpcMember(key)
			switch {
			case !ok:
				return h, errScan
			case i < 0:
				key = nil // not a JSON-RPC member, however it is written
			case !exact || seen[i]:
				return h, errAmbiguous
			default:
				seen[i] = true
				key = rpcMemberKeys[i] // match the cases below by value
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
			m, ok := methodName(raw)
			if !ok || (strict && m == "") {
				// No method is named by the empty string; a client's
				// frame naming it is not a request the relay can gate.
				return h, errScan
			}
			h.method, hasMethod = m, true
		case `"id"`:
			if !s.skip(0) {
				return h, errScan
			}
			h.id, h.idAt, hasID = b[start:s.i], start, true
		case `"params"`:
			if walk {
				h.paramsClean = s.walkClean()
			}
			if !h.paramsClean && !s.skip(0) {
				return h, errScan
			}
			h.params, h.paramsAt = b[start:s.i], start
		case `"result"`, `"error"`:
			if strict && seen[4] && seen[5] {
				// Both: readers differ on which one counts.
				return h, errAmbiguous
			}
			if strict && string(key) == `"error"` && (s.i >= len(b) || b[s.i] != '{') {
				// "error":null is a result to most readers.
				return h, errAmbiguous
			}
			hasResult = true
			h.isError = string(key) == `"error"`
			if hasID && !strict {
				// A response: nothing after the id matters to the relay.
				h.kind = kindResponse
				return h, nil
			}
			if walk {
				h.answerClean = s.walkClean()
			}
			if !h.answerClean && !s.skip(0) {
				return h, errScan
			}
			h.answer = b[start:s.i]
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

// walkClean reads the value at the scanner as repeatedMember reads it.
// If the check passes it (the value is well formed, gives no member twice
// in any object, and nests no deeper than maxNesting), the scanner is moved
// past the value and walkClean reports true: skip would have stopped at the
// same place, since on well-formed JSON counting brackets finds the
// structure's own end. Otherwise the scanner is left where it was, for
// skip to consume the value as it always has, and for the check to read
// the value again and say what it found.
func (s *scanner) walkClean() bool {
	w := scanner{b: s.b, i: s.i, exactNames: true}
	if _, found, ok := w.names(0); !ok || found || w.tooDeep {
		return false
	}
	s.i = w.i
	return true
}

// maxNesting bounds skip's recursion on hostile input.
const maxNesting = 512

type scanner struct {
	b []byte
	i int
	// fast makes skip find the end of an object or array by its brackets
	// and strings only, without checking what lies between.
	fast bool
	// tooDeep is set when a value nests deeper than maxNesting.
	tooDeep bool
	// deep lets skipBrackets (fast) skip values nested deeper than
	// maxNesting: it does not recurse.
	deep bool
	// exactNames makes names compare member names exactly rather than
	// folding letter case.
	exactNames bool
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

// str consumes a string and returns it with its quotes. The closing
// quote is found with bytes.IndexByte and the span before it checked for
// escapes and control characters eight bytes at a time; only a string
// with an escape is stepped through.
func (s *scanner) str() ([]byte, bool) {
	start := s.i
	if !s.eat('"') {
		return nil, false
	}
	// Most strings are short names and values: stepped through, they cost
	// less than setting up IndexByte. The index is kept in a local (the
	// scanner's field would be stored at every byte).
	b, i := s.b, s.i
	for n := 0; n < 16 && i < len(b); n++ {
		c := b[i]
		if !strStop[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			s.i = i + 1
			return b[start:s.i], true
		case c == '\\':
			i += 2
		default: // a control character
			s.i = i
			return nil, false
		}
	}
	s.i = i
	for {
		if s.i > len(s.b) {
			return nil, false
		}
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			return nil, false
		}
		k := firstSpecial(s.b[s.i : s.i+j])
		if k < 0 {
			s.i += j + 1
			return s.b[start:s.i], true
		}
		p := s.i + k
		if s.b[p] != '\\' || p+1 >= len(s.b) {
			return nil, false // a control character, or a trailing backslash
		}
		s.i = p + 2 // past the escape: the quote found may have been escaped
	}
}

// strStop marks the bytes str's first loop stops at: the quote, the
// backslash and the control characters.
var strStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// firstSpecial is the index of the first backslash or control character
// in b, or -1.
func firstSpecial(b []byte) int {
	const (
		ones       = 0x0101010101010101
		highs      = 0x8080808080808080
		backslashs = '\\' * ones
		spaces     = 0x20 * ones
	)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		x := w ^ backslashs
		// A high bit set where w has a byte below 0x20 or a backslash.
		if ((w-spaces)&^w|(x-ones)&^x)&highs != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '\\' || c < 0x20 {
			return i
		}
	}
	return -1
}

// skip consumes one value.
func (s *scanner) skip(depth int) bool {
	if depth > maxNesting {
		s.tooDeep = true
		return false
	}
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; c {
	case '"':
		_, ok := s.str()
		return ok
	case '{', '[':
		if s.fast {
			return s.skipBrackets(depth)
		}
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

// skipBrackets consumes an object or array by counting its brackets,
// stepping over strings.
func (s *scanner) skipBrackets(depth int) bool {
	d := 0
	b := s.b
	for s.i < len(b) {
		for s.i < len(b) && !bracketByte[b[s.i]] {
			s.i++
		}
		if s.i >= len(b) {
			break
		}
		switch b[s.i] {
		case '"':
			if _, ok := s.str(); !ok {
				return false
			}
			continue
		case '{', '[':
			d++
			if depth+d > maxNesting && !s.deep {
				s.tooDeep = true
				return false
			}
		case '}', ']':
			d--
			if d == 0 {
				s.i++
				return true
			}
		}
		s.i++
	}
	return false
}

// bracketByte marks the bytes skipBrackets stops at.
var bracketByte = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

func literalOK(v []byte) bool {
	switch string(v) {
	case "true", "false", "null":
		return true
	}
	return validNumber(v)
}

// validNumber reports whether v is a JSON number (RFC 8259 §6):
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(v []byte) bool {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	switch {
	case i < len(v) && v[i] == '0':
		i++
	case i < len(v) && v[i] >= '1' && v[i] <= '9':
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(v) && v[i] == '.' {
		i++
		start := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		start := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(v)
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

// inputRequired reports whether a response is MCP 2026-07-28's request for
// client input: its result's resultType is "input_required". Most results
// do not contain the word at all, and are not walked.
func inputRequired(frame []byte) bool {
	return bytes.Contains(frame, []byte("input_required")) &&
		string(resultMember(frame, "resultType")) == `"input_required"`
}

// resultMember returns the raw value of result.<name> in a response frame,
// skipping everything else, or nil.
func resultMember(b []byte, name string) []byte {
	return objectMember(objectMember(b, `"result"`), `"`+name+`"`)
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

// subscriptionIDKey is the _meta member (MCP 2026-07-28) by which a
// server names the subscriptions/listen stream a message belongs to: the
// listen request's id, which the relay replaced by its own number.
var subscriptionIDKey = []byte(`"io.modelcontextprotocol/subscriptionId"`)

// subscriptionID finds <top>._meta["io.modelcontextprotocol/subscriptionId"]
// in an upstream frame (top is "params" or "result") and returns where its
// value starts in frame and the value, or -1.
func subscriptionID(frame []byte, top string) (int, []byte) {
	id := objectMember(objectMember(objectMember(frame, `"`+top+`"`), `"_meta"`), string(subscriptionIDKey))
	if id == nil {
		return -1, nil
	}
	return memberOffset(frame, id), id
}

// objectMember returns the raw value of the member named key (quoted) of
// the JSON object b, or nil (also when b is nil or not an object).
func objectMember(b []byte, key string) []byte {
	s := scanner{b: b}
	s.ws()
	if !s.eat('{') {
		return nil
	}
	return s.member(key)
}
