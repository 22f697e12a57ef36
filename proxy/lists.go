package proxy

import (
	"encoding/json"
	"strings"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
)

// listMembers names, for each list method, the member of its result that
// holds the entries and the member of an entry the view judges it by.
var listMembers = map[string]struct{ entries, key string }{
	gate.MethodToolsList:             {"tools", "name"},
	gate.MethodResourcesList:         {"resources", "uri"},
	gate.MethodResourceTemplatesList: {"resourceTemplates", "uriTemplate"},
	gate.MethodPromptsList:           {"prompts", "name"},
}

// listToken is the token whose view a list result is filtered to: the one
// the list request carried, else the session's (a bound delegation's,
// --token's, or that of the last call allowed).
func (s *session) listTokenFor(p *pending) string {
	if p.listToken != "" {
		return p.listToken
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.bound != nil:
		return s.bound.Token
	case s.cfg.SessionToken != "":
		return s.cfg.SessionToken
	}
	return s.listToken
}

// filterList removes the entries the token may not use from a list
// result, keeping every other member, and every kept entry, byte for byte;
// the id is the client's. It returns nil when nothing is removed (in
// observe mode, always), and false when the result cannot be read (the
// caller then refuses to relay it: filtering fails closed, observed or
// not).
func (s *session) filterList(p *pending, frame []byte) ([]byte, bool) {
	m, ok := listMembers[p.method]
	if !ok {
		return nil, false
	}
	tok := s.listTokenFor(p)
	var accept func(string, *dct.AuthorizedScope) error
	// A list is filtered by the policy in force when its answer comes.
	g := s.cfg.Gates.Load().Gate
	if g.Accept != nil {
		accept = func(tok string, scope *dct.AuthorizedScope) error { return g.Accept(tok, scope, s.proven(tok)) }
	}
	view, err := g.ListViewAccepting(p.method, tok, accept)
	if err != nil {
		msg := "the list token does not verify; the list is empty"
		if s.cfg.Observe {
			msg = "the list token does not verify; the list would be empty"
		}
		s.log.Warn(msg, zap.String("method", p.method), zap.Error(err))
	}
	// Read as strictly as the client may read it: a member given twice, or
	// a re-cased "tools" or "name" that a Go client would take instead of
	// the one the filter saw, makes the result unreadable.
	msg, err := strictMembers(frame, "")
	if err != nil {
		return nil, false
	}
	result, err := strictMembers(msg["result"], m.entries)
	if err != nil {
		return nil, false
	}
	var entries []json.RawMessage
	if raw, present := result[m.entries]; present {
		if json.Unmarshal(raw, &entries) != nil {
			return nil, false
		}
	}
	kept := make([]json.RawMessage, 0, len(entries))
	var hidden []string // in observe mode, what the view hides
	pinKind, pinned := s.pinListKind(p.method)
	for _, e := range entries {
		named, err := strictMembers(e, m.key)
		if err != nil {
			return nil, false
		}
		var key string
		if json.Unmarshal(named[m.key], &key) != nil {
			// An entry the gate cannot read is not shown.
			if s.cfg.Observe {
				hidden = wouldHide(hidden, string(named[m.key]))
			}
			continue
		}
		if view(key) && (!pinned || s.pinShown(pinKind, e)) {
			kept = append(kept, e)
		} else if s.cfg.Observe {
			hidden = wouldHide(hidden, key)
		}
	}
	if s.cfg.Observe {
		s.logUnfiltered(p.method, len(entries), len(kept), hidden)
		return nil, true
	}
	if len(kept) == len(entries) {
		return nil, true
	}
	var err2 error
	if result[m.entries], err2 = json.Marshal(kept); err2 != nil {
		return nil, false
	}
	if msg["result"], err2 = json.Marshal(result); err2 != nil {
		return nil, false
	}
	msg["id"] = p.id
	out, err2 := json.Marshal(msg)
	if err2 != nil {
		return nil, false
	}
	s.log.Info("list filtered", zap.String("method", p.method), zap.Int("upstream", len(entries)), zap.Int("shown", len(kept)))
	return append(out, '\n'), true
}

// strictMembers reads a JSON object's members, refusing one given twice
// or in two letter cases (which readers resolve differently), and a member
// that is key in other letter case (which a Go client would read as key).
func strictMembers(raw []byte, key string) (map[string]json.RawMessage, error) {
	s := scanner{b: raw}
	s.ws()
	if !s.eat('{') {
		return nil, errParamsNotObject
	}
	members := map[string]json.RawMessage{}
	var seen nameSet
	s.ws()
	if s.eat('}') {
		return members, nil
	}
	for {
		s.ws()
		k, ok := s.str()
		if !ok {
			return nil, errParamsNotObject
		}
		name, ok := memberName(k)
		if !ok {
			return nil, errParamsNotObject
		}
		if seen.add(name) || key != "" && string(name) != key && strings.EqualFold(string(name), key) {
			return nil, &repeatedMemberError{name: string(name)}
		}
		s.ws()
		if !s.eat(':') {
			return nil, errParamsNotObject
		}
		s.ws()
		start := s.i
		if !s.skip(0) {
			return nil, errParamsNotObject
		}
		members[string(name)] = raw[start:s.i]
		s.ws()
		if s.eat(',') {
			continue
		}
		if !s.eat('}') {
			return nil, errParamsNotObject
		}
		break
	}
	s.ws()
	if s.i != len(raw) {
		return nil, errParamsNotObject
	}
	return members, nil
}
