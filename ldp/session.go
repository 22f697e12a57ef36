package ldp

import (
	"crypto/rand"
	"fmt"
	"sync"
	"time"
)

// State is a session's state (§5.1).
type State string

// The states of §5.1.
const (
	StateInitiating State = "initiating"
	StateProposed   State = "proposed"
	StateActive     State = "active"
	StateSuspended  State = "suspended"
	StateClosed     State = "closed"
	StateFailed     State = "failed"
)

// transitions are §5.1's arrows (an expired session is closed).
var transitions = map[State][]State{
	StateInitiating: {StateProposed, StateFailed, StateClosed},
	StateProposed:   {StateActive, StateFailed},
	StateActive:     {StateSuspended, StateClosed},
	StateSuspended:  {StateActive, StateClosed},
}

// SessionError is a message refused by a session's state; Code is the LDP
// error code a delegate answers with.
type SessionError struct {
	Code   string
	Detail string
}

func (e *SessionError) Error() string { return e.Code + ": " + e.Detail }

// Session error codes.
const (
	CodeSessionUnknown   = "SESSION_UNKNOWN"
	CodeSessionExpired   = "SESSION_EXPIRED"
	CodeSessionSuspended = "SESSION_SUSPENDED"
	CodeSessionClosed    = "SESSION_CLOSED"
	CodeSessionState     = "SESSION_STATE"
	CodeSessionPeer      = "SESSION_PEER"
	CodeSessionsFull     = "SESSIONS_FULL"
	CodePayloadMode      = "PAYLOAD_MODE"
)

// Session is one governed session as a responder holds it (§5.3).
type Session struct {
	ID string
	// Peer is the initiator's delegate ID (the from of SESSION_PROPOSE);
	// every later message of the session must come from it.
	Peer string
	// PeerAlgorithm is how SESSION_PROPOSE was signed ("" when signatures
	// are not checked), and PeerSigner the key that signed it when that
	// was Ed25519: later envelopes of the session must be signed the same
	// way, by the same key.
	PeerAlgorithm string
	PeerSigner    string
	State         State
	Payload       Negotiated
	TTL           time.Duration
	Created       time.Time
	LastUsed      time.Time
	Tasks         int
	// CloseReason says why a closed or failed session ended.
	CloseReason string
	// Token is the delegation token the SESSION_PROPOSE carried, nil when
	// none: it goes with the session, and is forgotten with it.
	Token *DelegateOSMember
	// Tree is the delegation tree the session's peer acts in (see
	// Responder.Tree): what its sessions, and its envelopes' places in the
	// replay store, are counted by. Empty: none (counted by peer only).
	Tree string
}

// expired reports whether the session has been idle for its TTL (§5.4).
func (s *Session) expired(now time.Time) bool { return now.Sub(s.LastUsed) >= s.TTL }

func (s *Session) move(to State) error {
	for _, ok := range transitions[s.State] {
		if ok == to {
			s.State = to
			return nil
		}
	}
	return &SessionError{CodeSessionState, fmt.Sprintf("session %s is %s; it cannot become %s", s.ID, s.State, to)}
}

// Sessions is a responder's table of sessions. The zero value holds
// DefaultMaxSessions with the real clock. It is safe for concurrent use;
// it hands out copies, never its own *Session.
type Sessions struct {
	// Max bounds the sessions held, closed ones until swept; zero means
	// DefaultMaxSessions.
	Max int
	// MaxPerPeer bounds the live sessions of one peer (its Ed25519 key,
	// else its delegate ID), so that one admitted peer cannot take them
	// all; zero means DefaultMaxSessionsPerPeer.
	MaxPerPeer int
	// MaxPerTree bounds the live sessions of one delegation tree (a
	// session's Tree), whose holders may have many keys; zero means
	// DefaultMaxSessionsPerTree.
	MaxPerTree int
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu sync.Mutex
	m  map[string]*Session
}

func (t *Sessions) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// Open records a new active session with peer, whose SESSION_PROPOSE was
// signed as by says and carried tok (nil: none), in delegation tree tree
// ("": none), in the negotiated
// payload after the trust check: it goes through
// proposed to active, and is returned with a fresh random ID. ttl zero
// means DefaultTTL; more than MaxTTL is cut to MaxTTL.
func (t *Sessions) Open(peer string, by Verified, tok *DelegateOSMember, tree string, p Negotiated, ttl time.Duration) (Session, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	ttl = min(ttl, MaxTTL)
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*Session{}
	}
	max := t.Max
	if max <= 0 {
		max = DefaultMaxSessions
	}
	// A peer's and a tree's shares are counted before the table's, so
	// that a tree (or a peer) at its share is told so, whoever else fills
	// the table.
	perPeer := t.MaxPerPeer
	if perPeer <= 0 {
		perPeer = DefaultMaxSessionsPerPeer
	}
	if n := t.liveOf(peer, by, now); n >= perPeer {
		return Session{}, &SessionError{CodeSessionsFull, fmt.Sprintf("this peer has %d sessions open, at most %d: close one", n, perPeer)}
	}
	if tree != "" {
		perTree := t.MaxPerTree
		if perTree <= 0 {
			perTree = DefaultMaxSessionsPerTree
		}
		if n := t.liveIn(tree, now); n >= perTree {
			return Session{}, &SessionError{CodeSessionsFull, fmt.Sprintf("the delegation tree this peer acts in (%s) has %d sessions open, at most %d: close one", clip(tree), n, perTree)}
		}
	}
	if len(t.m) >= max {
		t.sweep(now)
		if len(t.m) >= max {
			return Session{}, &SessionError{CodeSessionsFull, fmt.Sprintf("%d sessions are open, at most %d", len(t.m), max)}
		}
	}
	s := &Session{ID: newSessionID(), Peer: peer, PeerAlgorithm: by.Algorithm, Token: tok, Tree: tree, State: StateInitiating,
		Payload: p, TTL: ttl, Created: now, LastUsed: now}
	if by.Algorithm == AlgEd25519 {
		s.PeerSigner = by.Signer
	}
	if err := s.move(StateProposed); err != nil {
		return Session{}, err
	}
	if err := s.move(StateActive); err != nil {
		return Session{}, err
	}
	t.m[s.ID] = s
	return *s, nil
}

// liveOf counts the live sessions of the peer (by its Ed25519 key when it
// signed with one, else by its delegate ID). t.mu is held.
func (t *Sessions) liveOf(peer string, by Verified, now time.Time) int {
	n := 0
	for _, s := range t.m {
		if s.State != StateActive && s.State != StateSuspended || s.expired(now) {
			continue
		}
		if by.Algorithm == AlgEd25519 && s.PeerSigner == by.Signer || by.Algorithm != AlgEd25519 && s.PeerSigner == "" && s.Peer == peer {
			n++
		}
	}
	return n
}

// liveIn counts the live sessions of delegation tree tree. t.mu is held.
func (t *Sessions) liveIn(tree string, now time.Time) int {
	n := 0
	for _, s := range t.m {
		if s.Tree == tree && (s.State == StateActive || s.State == StateSuspended) && !s.expired(now) {
			n++
		}
	}
	return n
}

// sweep forgets closed, failed and expired sessions. t.mu is held.
func (t *Sessions) sweep(now time.Time) {
	for id, s := range t.m {
		if s.State == StateClosed || s.State == StateFailed || s.expired(now) {
			delete(t.m, id)
		}
	}
}

// lookup returns the live session id of peer, closing it first if it has
// expired. t.mu is held.
func (t *Sessions) lookup(id, peer string, now time.Time) (*Session, error) {
	s := t.m[id]
	if s == nil {
		return nil, &SessionError{CodeSessionUnknown, fmt.Sprintf("no session %q", clip(id))}
	}
	if s.Peer != peer {
		// Another peer's session is as unknown to this one as a missing one.
		return nil, &SessionError{CodeSessionUnknown, fmt.Sprintf("no session %q", clip(id))}
	}
	if (s.State == StateActive || s.State == StateSuspended) && s.expired(now) {
		s.State, s.CloseReason = StateClosed, "expired"
	}
	switch s.State {
	case StateClosed:
		code := CodeSessionClosed
		if s.CloseReason == "expired" {
			code = CodeSessionExpired
		}
		return nil, &SessionError{code, fmt.Sprintf("session %s is closed (%s)", s.ID, s.CloseReason)}
	case StateFailed:
		return nil, &SessionError{CodeSessionClosed, fmt.Sprintf("session %s failed", s.ID)}
	}
	return s, nil
}

// Use admits a task in session id from peer: the session must be active
// and not expired (a suspended one answers SESSION_SUSPENDED), and mode
// one the session allows. It counts the task and restarts the TTL.
func (t *Sessions) Use(id, peer string, mode PayloadMode) (Session, error) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.lookup(id, peer, now)
	if err != nil {
		return Session{}, err
	}
	if s.State == StateSuspended {
		return Session{}, &SessionError{CodeSessionSuspended, fmt.Sprintf("session %s is suspended", s.ID)}
	}
	if !s.Payload.Allows(mode) {
		return Session{}, &SessionError{CodePayloadMode, fmt.Sprintf("session %s runs in %s; %s is not in its fallback chain", s.ID, s.Payload.Mode, clip(string(mode)))}
	}
	s.LastUsed = now
	s.Tasks++
	return *s, nil
}

// Touch restarts the TTL of a live session (for messages other than
// tasks, such as TASK_CANCEL).
func (t *Sessions) Touch(id, peer string) (Session, error) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.lookup(id, peer, now)
	if err != nil {
		return Session{}, err
	}
	s.LastUsed = now
	return *s, nil
}

// FallBack moves session id to the next mode of its fallback chain after
// a task failed in mode (§4.3): the session continues in the lower mode.
// When mode is not the session's current mode (a fallback already
// happened), the session is left as it is. ErrNoFallback means the session
// already runs in its last mode; it stays open.
func (t *Sessions) FallBack(id, peer string, mode PayloadMode) (Session, error) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.lookup(id, peer, now)
	if err != nil {
		return Session{}, err
	}
	if mode == s.Payload.Mode {
		if _, err := s.Payload.FallBack(); err != nil {
			return *s, err
		}
	}
	return *s, nil
}

// Suspend suspends an active session: tasks are refused until Resume.
// Its TTL keeps running.
func (t *Sessions) Suspend(id, peer string) (Session, error) {
	return t.transition(id, peer, StateSuspended, "")
}

// Resume makes a suspended session active again, unless it expired.
func (t *Sessions) Resume(id, peer string) (Session, error) {
	return t.transition(id, peer, StateActive, "")
}

// Close closes a session (SESSION_CLOSE) with reason.
func (t *Sessions) Close(id, peer, reason string) (Session, error) {
	return t.transition(id, peer, StateClosed, reason)
}

func (t *Sessions) transition(id, peer string, to State, reason string) (Session, error) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.lookup(id, peer, now)
	if err != nil {
		return Session{}, err
	}
	if err := s.move(to); err != nil {
		return Session{}, err
	}
	if to == StateActive {
		s.LastUsed = now
	}
	if to == StateClosed {
		s.CloseReason = reason
	}
	return *s, nil
}

// Get returns session id as it stands (expired sessions are reported
// closed), whoever its peer.
func (t *Sessions) Get(id string) (Session, bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.m[id]
	if s == nil {
		return Session{}, false
	}
	if (s.State == StateActive || s.State == StateSuspended) && s.expired(now) {
		s.State, s.CloseReason = StateClosed, "expired"
	}
	return *s, true
}

// newSessionID returns a random UUID (version 4), the form the reference
// uses.
func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
