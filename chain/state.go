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
// insert carries only Delegation; a status change carries Key, ID, At and,
// for a completion or failure, an optional AttestationID. Key names the
// delegation changed and ID is there for people; a line written before
// keys existed has only ID, which then named one delegation.
type event struct {
	Op            string      `json:"op"`
	Delegation    *Delegation `json:"delegation,omitempty"`
	ID            string      `json:"id,omitempty"`
	Key           string      `json:"key,omitempty"`
	AttestationID string      `json:"attestationId,omitempty"`
	At            string      `json:"at,omitempty"`
}

// rec is a recorded delegation with what its children are checked against.
type rec struct {
	d        Delegation
	blocks   int      // the blocks of its token
	rootMax  int64    // the root token's authority.maxChainDepth
	children []string // keys, in the order they were inserted
}

// state is the chain as a sequence of events made it. Memory and File
// both change it only through prepare, so a record from a caller and a
// line from a log pass the same checks. Records are held by key; an ID
// finds every record that has it.
type state struct {
	recs  map[string]*rec
	byID  map[string][]string // ID → keys, in insertion order
	order []string            // keys in insertion order
}

// prepare checks e against the state and returns the change it makes,
// which returns the IDs whose status it changed. Nothing changes until
// commit is called, and commit cannot fail.
func (s *state) prepare(e *event) (commit func() []string, err error) {
	switch e.Op {
	case opInsert:
		if e.Delegation == nil || e.ID != "" || e.Key != "" || e.AttestationID != "" || e.At != "" {
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
	if _, ok := s.recs[d.Key]; ok {
		return nil, fmt.Errorf("%w: %s (key %s)", ErrDuplicate, d.ID, d.Key)
	}
	if d.IsRoot() {
		if err := checkRoot(&d, tok); err != nil {
			return nil, err
		}
		return &rec{d: d, blocks: 1, rootMax: tok.Unverified().Authority.MaxChainDepth}, nil
	}
	parent := s.recs[d.ParentKey]
	if parent == nil || parent.d.ID != d.ParentID {
		// The parent is the recorded delegation with the parent ID whose
		// token the child's continues (a child adding several blocks may
		// repeat an ID among them); with none, say how the child departs
		// from the latest with the ID.
		keys := s.byID[d.ParentID]
		if len(keys) == 0 {
			return nil, violation(InvariantParent, d.ID, "its parent %s is not recorded", d.ParentID)
		}
		var err error
		for i := len(keys) - 1; i >= 0; i-- {
			p := s.recs[keys[i]]
			if e := checkChild(p, &d, tok); e == nil {
				d.ParentKey = p.d.Key
				return &rec{d: d, blocks: tok.Blocks(), rootMax: p.rootMax}, nil
			} else if i == len(keys)-1 {
				err = e
			}
		}
		return nil, err
	}
	if err := checkChild(parent, &d, tok); err != nil {
		return nil, err
	}
	return &rec{d: d, blocks: tok.Blocks(), rootMax: parent.rootMax}, nil
}

func (s *state) insert(r *rec) {
	if s.recs == nil {
		s.recs = make(map[string]*rec)
		s.byID = make(map[string][]string)
	}
	k := r.d.Key
	s.recs[k] = r
	s.byID[r.d.ID] = append(s.byID[r.d.ID], k)
	s.order = append(s.order, k)
	if p := s.recs[r.d.ParentKey]; p != nil && r.d.ParentKey != "" {
		p.children = append(p.children, k)
	}
}

// find returns the record a reference names: a key, or an ID that one
// record alone has.
func (s *state) find(ref string) (*rec, error) {
	if r := s.recs[ref]; r != nil {
		return r, nil
	}
	switch keys := s.byID[ref]; {
	case len(keys) == 1:
		return s.recs[keys[0]], nil
	case len(keys) > 1:
		return nil, fmt.Errorf("delegation %s: %w (%d are recorded)", clip(ref), ErrAmbiguous, len(keys))
	}
	return nil, notFound(ref)
}

// prepareStatus checks a completion, failure or revocation.
func (s *state) prepareStatus(e *event) (func() []string, error) {
	if e.Delegation != nil {
		return nil, malformed("a %s carries no delegation", e.Op)
	}
	if e.Key != "" && !ValidKey(e.Key) {
		return nil, malformed("%s: key %q is not a delegation key", e.Op, clip(e.Key))
	}
	if (e.Key == "" || e.ID != "") && !ValidDelegationID(e.ID) {
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
	var r *rec
	if e.Key != "" {
		if r = s.recs[e.Key]; r == nil {
			return nil, notFound(e.Key)
		}
		if e.ID != "" && e.ID != r.d.ID {
			return nil, malformed("%s of %s: the delegation with key %s is %s", e.Op, e.ID, e.Key, r.d.ID)
		}
	} else {
		// A line from before keys, or a caller naming an ID: it must name
		// one delegation.
		var err error
		if r, err = s.find(e.ID); err != nil {
			return nil, err
		}
	}
	// What is written names the delegation by both.
	e.Key, e.ID = r.d.Key, r.d.ID
	if r.d.Status != StatusActive {
		return nil, &TransitionError{ID: r.d.ID, Key: r.d.Key, From: r.d.Status, To: to}
	}
	return func() []string {
		changed := []string{r.d.Key}
		if to == StatusRevoked {
			changed = s.activeDescendants(r, changed)
		}
		for _, k := range changed {
			d := &s.recs[k].d
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

func (s *state) get(ref string) (Delegation, error) {
	r, err := s.find(ref)
	if err != nil {
		return Delegation{}, err
	}
	return r.d, nil
}

// status looks a delegation up by key only: it is what the gate asks on
// every call, and an ID may name a delegation other than the caller's.
func (s *state) status(key string) (Status, bool) {
	r := s.recs[key]
	if r == nil {
		return "", false
	}
	return r.d.Status, true
}

// withID returns every delegation with the given ID, in insertion order.
func (s *state) withID(id string) []Delegation {
	keys := s.byID[id]
	ds := make([]Delegation, len(keys))
	for i, k := range keys {
		ds[i] = s.recs[k].d
	}
	return ds
}

func (s *state) list() []Delegation {
	ds := make([]Delegation, len(s.order))
	for i, id := range s.order {
		ds[i] = s.recs[id].d
	}
	return ds
}
