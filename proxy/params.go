package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// callParams are the members of a request's params that the gate reads,
// as raw JSON: tools/call's name and arguments, resources/read's uri,
// prompts/get's name and arguments, completion/complete's ref (and, read
// from a ref, its type), subscriptions/listen's notifications (and, read
// from them, resourceSubscriptions), notifications/cancelled's requestId,
// and _delegateos on any of them.
type callParams struct {
	name, arguments, uri, ref, typ, requestID, delegateos []byte
	notifications, resourceSubscriptions                  []byte
	// strip is set when the params carry _delegateos in any letter case:
	// the member is removed before the request is forwarded. stripFrom and
	// stripTo are the bytes of the params to cut for it: the member and
	// one comma next to it.
	strip              bool
	stripFrom, stripTo int
	// variant is a member whose name differs only in letter case from one
	// the gate reads ("Name", "URI", "Notifications", ...). A server that
	// decodes with encoding/json would read it as that member, which the
	// gate did not see: a gated request that has one is refused.
	variant string
	// open is where the params object's '{' is; members counts its
	// members. meta is params._meta's value (in any letter case, as a
	// server decoding with encoding/json reads it) and metaAt where it
	// starts: tracing propagates its trace context through it (trace.go).
	open, members int
	meta          []byte
	metaAt        int
}

// gatedMembers are the names readCallParams finds for the gate.
var gatedMembers = [...]string{"name", "arguments", "uri", "ref", "type", "requestId", "notifications", "resourceSubscriptions"}

// caseVariant reports whether name is one of gatedMembers in other
// letter case.
func caseVariant(name []byte) bool {
	for _, m := range gatedMembers {
		if len(name) >= len(m)-2 && len(name) <= 3*len(m) && string(name) != m && bytes.EqualFold(name, []byte(m)) {
			return true
		}
	}
	return false
}

// Why readCallParams refuses params.
var (
	errParamsNotObject = errors.New("params must be an object")
	errParamsTooDeep   = fmt.Errorf("params nest deeper than %d levels", maxNesting)
)

// repeatedMemberError is params in which one object gives a member twice.
type repeatedMemberError struct{ name string }

func (e *repeatedMemberError) Error() string {
	return fmt.Sprintf("params give the member %q more than once (names that differ only in letter case count as the same)", e.name)
}

// readCallParams reads a request's params in one pass: it finds the
// members the gate needs and makes sure that no object in them, at any
// depth, gives a member twice, counting names that differ only in letter
// case as the same (encoding/json, which many servers decode with, matches
// them and takes the last), so that the upstream reads the request the
// gate decides. Names are compared decoded: "n\u0061me" is name.
func readCallParams(b []byte) (callParams, error) {
	var cp callParams
	s := scanner{b: b}
	s.ws()
	cp.open = s.i
	if !s.eat('{') {
		return cp, errParamsNotObject
	}
	s.ws()
	if !s.eat('}') {
		var seen nameSet
		prevEnd := -1 // where the previous member's value ended
		for {
			s.ws()
			memberStart := s.i
			raw, ok := s.str()
			if !ok {
				return cp, errParamsNotObject
			}
			name, ok := memberName(raw)
			if !ok {
				return cp, errParamsNotObject
			}
			if seen.add(name) {
				return cp, &repeatedMemberError{name: string(name)}
			}
			s.ws()
			if !s.eat(':') {
				return cp, errParamsNotObject
			}
			s.ws()
			start := s.i
			dup, found, ok := s.names(1)
			switch {
			case s.tooDeep:
				return cp, errParamsTooDeep
			case !ok:
				return cp, errParamsNotObject
			case found:
				return cp, &repeatedMemberError{name: dup}
			}
			v := b[start:s.i]
			cp.members++
			if len(name) == len("_meta") && bytes.EqualFold(name, []byte("_meta")) {
				cp.meta, cp.metaAt = v, start
			}
			switch string(name) {
			case "name":
				cp.name = v
			case "arguments":
				cp.arguments = v
			case "uri":
				cp.uri = v
			case "ref":
				cp.ref = v
			case "type":
				cp.typ = v
			case "requestId":
				cp.requestID = v
			case "notifications":
				cp.notifications = v
			case "resourceSubscriptions":
				cp.resourceSubscriptions = v
			case "_delegateos":
				cp.delegateos = v
			default:
				if cp.variant == "" && caseVariant(name) {
					cp.variant = string(name)
				}
			}
			if len(name) == len("_delegateos") && bytes.EqualFold(name, []byte("_delegateos")) {
				cp.strip = true
				if prevEnd >= 0 {
					// Cut from the end of the previous member: its comma goes.
					cp.stripFrom, cp.stripTo = prevEnd, s.i
				} else {
					cp.stripFrom, cp.stripTo = memberStart, -1 // up to the next member, below
				}
			}
			valueEnd := s.i
			s.ws()
			if s.eat(',') {
				if cp.strip && cp.stripTo == -1 {
					s.ws()
					cp.stripTo = s.i
				}
				prevEnd = valueEnd
				continue
			}
			if !s.eat('}') {
				return cp, errParamsNotObject
			}
			if cp.strip && cp.stripTo == -1 {
				cp.stripTo = valueEnd // the only member
			}
			break
		}
	}
	s.ws()
	if s.i != len(b) {
		return cp, errParamsNotObject
	}
	return cp, nil
}

// names consumes one value and reports the first member name repeated in
// one of its objects (found), which may be "". ok is false if the value is
// not well formed.
func (s *scanner) names(depth int) (dup string, found, ok bool) {
	if depth > maxNesting {
		s.tooDeep = true
		return "", false, false
	}
	if s.i >= len(s.b) {
		return "", false, false
	}
	switch s.b[s.i] {
	case '{':
		s.i++
		s.ws()
		if s.eat('}') {
			return "", false, true
		}
		var seen nameSet
		for {
			s.ws()
			raw, ok := s.str()
			if !ok {
				return "", false, false
			}
			name, ok := memberName(raw)
			if s.exactNames && ok && !utf8.Valid(name) {
				// Decoded as readers decode it: each bad byte a U+FFFD.
				var dec string
				ok = json.Unmarshal(raw, &dec) == nil
				name = []byte(dec)
			}
			if !ok {
				return "", false, false
			}
			if seen.addName(name, s.exactNames) {
				return string(name), true, true
			}
			s.ws()
			if !s.eat(':') {
				return "", false, false
			}
			s.ws()
			if dup, found, ok := s.names(depth + 1); found || !ok {
				return dup, found, ok
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			return "", false, s.eat('}')
		}
	case '[':
		s.i++
		s.ws()
		if s.eat(']') {
			return "", false, true
		}
		for {
			s.ws()
			if dup, found, ok := s.names(depth + 1); found || !ok {
				return dup, found, ok
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			return "", false, s.eat(']')
		}
	}
	return "", false, s.skip(depth)
}

// memberName decodes a member name (raw JSON with its quotes); only a
// name with escapes is copied.
func memberName(raw []byte) ([]byte, bool) {
	if v := raw[1 : len(raw)-1]; bytes.IndexByte(v, '\\') < 0 {
		return v, true
	}
	s, ok := unquote(raw)
	return []byte(s), ok
}

// nameSet holds the member names of one object and reports a name that
// strings.EqualFold holds equal to one already added. The first few names
// are compared in place, which costs no allocation for the small objects
// of a typical call; past that they go into a map by their folded form.
type nameSet struct {
	few  [8][]byte
	n    int
	many map[string]bool
}

// addName is add, or with exact set addExact.
func (ns *nameSet) addName(name []byte, exact bool) bool {
	if exact {
		return ns.addExact(name)
	}
	return ns.add(name)
}

// addExact adds name and reports whether the very same name was already
// there (names differing in letter case are different).
func (ns *nameSet) addExact(name []byte) bool {
	if ns.many == nil {
		for _, seen := range ns.few[:ns.n] {
			if bytes.Equal(seen, name) {
				return true
			}
		}
		if ns.n < len(ns.few) {
			ns.few[ns.n] = name
			ns.n++
			return false
		}
		ns.many = make(map[string]bool, 2*len(ns.few))
		for _, seen := range ns.few {
			ns.many[string(seen)] = true
		}
	}
	if ns.many[string(name)] {
		return true
	}
	ns.many[string(name)] = true
	return false
}

// repeatedMember finds, in a JSON value an upstream sent (a result or an
// error), an object that gives a member twice, at any depth, comparing
// names decoded ("n\u0061me" is name) and exactly: readers differ on which
// of the two counts, so the client could read what the receipt does not
// say. It returns the name, or tooDeep when v nests too deep to walk
// (where a repeated member could hide). A value that is not well formed
// is neither: no reader reads it.
func repeatedMember(v []byte) (name string, found, tooDeep bool) {
	s := scanner{b: v, exactNames: true}
	s.ws()
	name, found, _ = s.names(0)
	return name, found, s.tooDeep
}

// add adds name and reports whether it was already there.
func (ns *nameSet) add(name []byte) bool {
	if ns.many == nil {
		for _, seen := range ns.few[:ns.n] {
			if bytes.EqualFold(seen, name) {
				return true
			}
		}
		if ns.n < len(ns.few) {
			ns.few[ns.n] = name
			ns.n++
			return false
		}
		ns.many = make(map[string]bool, 2*len(ns.few))
		for _, seen := range ns.few {
			ns.many[foldName(string(seen))] = true
		}
	}
	f := foldName(string(name))
	if ns.many[f] {
		return true
	}
	ns.many[f] = true
	return false
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
