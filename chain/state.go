package chain

import (
	"fmt"
)

// The operations of an event.
const (
	opInsert   = "insert"
	opComplete = "complete"
	opFail     = "fail"
	opRevoke   = "revoke"
)

// event is one change to the chain, and one line of a File's log. An
// insert carries only Delegation; a status change carries ID, At and, for
// a completion or failure, an optional AttestationID.
type event struct {
	Op            string      `json:"op"`
	Delegation    *Delegation `json:"delegation,omitempty"`
	ID            string      `json:"id,omitempty"`
	AttestationID string      `json:"attestationId,omitempty"`
	At            string      `json:"at,omitempty"`
}

// rec is a recorded delegation with what its children are checked against.
type rec struct {
	d        Delegation
	blocks   int      // the blocks of its token
	rootMax  int64    // the root token's authority.maxChainDepth
	children []string // in the order they were inserted
}

// state is the chain as a sequence of events made it. Memory and File
// both change it only through prepare, so a record from a caller and a
// line from a log pass the same checks.
type state struct {
	recs  map[string]*rec
	order []string // IDs in insertion order
}

// prepare checks e against the state and returns the change it makes,
// which returns the IDs whose status it changed. Nothing changes until
// commit is called, and commit cannot fail.
func (s *state) prepare(e *event) (commit func() []string, err error) {
	switch e.Op {
	case opInsert:
		if e.Delegation == nil || e.ID != "" || e.AttestationID != "" || e.At != "" {
			return nil, malformed("an insert carries a delegation and nothing else")
		}
		r, err := s.checkInsert(*e.Delegation)
		if err != nil {
			return nil, err
		}
		return func() []string { s.insert(r); return nil }, nil
	case opComplete, opFail, opRevoke:
		return s.prepareStatus(e)
	default:
		return nil, malformed("unknown operation %q", clip(e.Op))
	}
}

// apply is prepare and commit.
func (s *state) apply(e *event) ([]string, error) {
	commit, err := s.prepare(e)
	if err != nil {
		return nil, err
	}
	return commit(), nil
}

// checkInsert checks a new record against the chain and returns what the
// state will hold for it. See Store.Insert for the order of the checks.
func (s *state) checkInsert(d Delegation) (*rec, error) {
	tok, err := checkNew(&d)
	if err != nil {
		return nil, err
	}
	if _, ok := s.recs[d.ID]; ok {
		return nil, fmt.Errorf("%w: %s", ErrDuplicate, d.ID)
	}
	if d.IsRoot() {
		if err := checkRoot(&d, tok); err != nil {
			return nil, err
		}
		return &rec{d: d, blocks: 1, rootMax: tok.Unverified().Authority.MaxChainDepth}, nil
	}
	parent := s.recs[d.ParentID]
	if parent == nil {
		return nil, violation(InvariantParent, d.ID, "its parent %s is not recorded", d.ParentID)
	}
	if err := checkChild(parent, &d, tok); err != nil {
		return nil, err
	}
	return &rec{d: d, blocks: tok.Blocks(), rootMax: parent.rootMax}, nil
}

func (s *state) insert(r *rec) {
	if s.recs == nil {
		s.recs = make(map[string]*rec)
	}
	s.recs[r.d.ID] = r
	s.order = append(s.order, r.d.ID)
	if p := s.recs[r.d.ParentID]; p != nil {
		p.children = append(p.children, r.d.ID)
	}
}

// prepareStatus checks a completion, failure or revocation.
func (s *state) prepareStatus(e *event) (func() []string, error) {
	if e.Delegation != nil {
		return nil, malformed("a %s carries no delegation", e.Op)
	}
	if !ValidDelegationID(e.ID) {
		return nil, malformed("%s: id %q is not del_ and 12 lowercase hex digits", e.Op, clip(e.ID))
	}
	if _, err := parseTime(e.At); err != nil {
		return nil, malformed("%s of %s: at: %v", e.Op, e.ID, err)
	}
	to := map[string]Status{opComplete: StatusCompleted, opFail: StatusFailed, opRevoke: StatusRevoked}[e.Op]
	if e.AttestationID != "" && to == StatusRevoked {
		return nil, malformed("a revocation names no attestation")
	}
	if e.AttestationID != "" && !ValidAttestationID(e.AttestationID) {
		return nil, malformed("%s of %s: attestationId %q is not att_ and 12 lowercase hex digits", e.Op, e.ID, clip(e.AttestationID))
	}
	r := s.recs[e.ID]
	if r == nil {
		return nil, notFound(e.ID)
	}
	if r.d.Status != StatusActive {
		return nil, &TransitionError{ID: e.ID, From: r.d.Status, To: to}
	}
	return func() []string {
		changed := []string{e.ID}
		if to == StatusRevoked {
			changed = s.activeDescendants(r, changed)
		}
		for _, id := range changed {
			d := &s.recs[id].d
			d.Status, d.CompletedAt = to, e.At
		}
		r.d.AttestationID = e.AttestationID
		return changed
	}, nil
}

// activeDescendants appends the active descendants of r, parents before
// their children, each family in insertion order. The walk passes through
// descendants that have ended: their own descendants may still be active.
func (s *state) activeDescendants(r *rec, ids []string) []string {
	for _, id := range r.children {
		c := s.recs[id]
		if c.d.Status == StatusActive {
			ids = append(ids, id)
		}
		ids = s.activeDescendants(c, ids)
	}
	return ids
}

func (s *state) get(id string) (Delegation, error) {
	r := s.recs[id]
	if r == nil {
		return Delegation{}, notFound(id)
	}
	return r.d, nil
}

func (s *state) status(id string) (Status, bool) {
	r := s.recs[id]
	if r == nil {
		return "", false
	}
	return r.d.Status, true
}

func (s *state) list() []Delegation {
	ds := make([]Delegation, len(s.order))
	for i, id := range s.order {
		ds[i] = s.recs[id].d
	}
	return ds
}
