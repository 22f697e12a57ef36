package avpsig

import (
	"context"
	"crypto/ed25519"
	"sync"
	"time"
)

// A NonceStore remembers the nonces of accepted signatures, so that each is
// accepted once. A Verifier spends a nonce only after its signature has
// verified, so a store never holds a nonce its signer did not sign.
// Implementations are safe for concurrent use.
type NonceStore interface {
	// Spend records n's nonce as used by its signer until n.Expires. It
	// returns nil when the nonce was not in use and is now spent: the
	// request may be accepted. Otherwise it returns an *Error:
	// ReasonReplayed when the nonce is already spent, ReasonBusy when the
	// store holds as many nonces as it may (for n.Tree, or in all),
	// ReasonUnavailable when it cannot tell (the request is then refused,
	// never accepted).
	Spend(ctx context.Context, n Nonce) error
}

// Nonce is a nonce of a verified signature, as a Verifier spends it.
type Nonce struct {
	// Signer is the key that signed; DID its did:key as the signature
	// names it, for messages.
	Signer ed25519.PublicKey
	DID    string
	// Tree is what the signer's nonces are counted against: for a
	// delegation token, its delegation tree (an ID of its root block),
	// which a holder cannot multiply as she can her keys. Empty means the
	// signer's key is a tree of its own.
	Tree string
	// Nonce is the signature's nonce.
	Nonce string
	// Signed is the signature's timestamp; zero when not known.
	Signed time.Time
	// Now is the verifier's clock when it verified the signature.
	Now time.Time
	// Expires is the instant, on the verifier's clock, from which the
	// signature's timestamp lies outside the window (its timestamp plus
	// the window plus a second: the window is checked in whole seconds).
	// A replay from then on is refused as stale, so the nonce need not be
	// remembered longer.
	Expires time.Time
}

// tree is the tree n's nonce counts against: its Tree, else its signer's
// did:key (a tree ID never starts with "did:").
func (n Nonce) tree() string {
	if n.Tree != "" {
		return n.Tree
	}
	return n.DID
}

// MemoryNonces is a NonceStore in the memory of one process: a Verifier
// with no Store uses one. It holds at most Max nonces, MaxPerTree for one
// delegation tree, and refuses a new one (ReasonBusy) rather than forget
// one early. A tree also takes a nonce only while it holds fewer than
// there are free places (Max minus the nonces held): however many trees
// take all they can, the store never fills, and a tree holding none
// always finds a place. The zero value is ready to use with the
// defaults.
type MemoryNonces struct {
	// Max bounds the nonces held; zero means DefaultMaxNonces.
	Max int
	// MaxPerTree bounds the nonces held for one tree (Nonce.Tree), so
	// that the holders of one token, however many keys they attenuate it
	// to, cannot take them all; zero means DefaultMaxNoncesPerTree.
	MaxPerTree int

	mu sync.Mutex
	// nonces maps signer key + nonce to its tree and the last Unix second
	// at which it can be replayed (its ts plus the window). A nonce is one
	// signer's, whatever token it came with: the signature does not cover
	// the bearer token, so a replay with another token is still a replay.
	nonces    map[string]spent
	lastSweep int64
	// perTree counts the nonces held for each tree.
	perTree map[string]int
}

type spent struct {
	until int64
	tree  string
}

var _ NonceStore = (*MemoryNonces)(nil)

// Spend implements NonceStore.
func (m *MemoryNonces) Spend(_ context.Context, n Nonce) error {
	if len(n.Signer) != ed25519.PublicKeySize {
		return refuse(ReasonWrongKey, "the signer's key has %d bytes, not %d", len(n.Signer), ed25519.PublicKeySize)
	}
	return m.spend(n, m.Max, m.MaxPerTree)
}

// spend is Spend with the bounds given (zero for the defaults).
func (m *MemoryNonces) spend(n Nonce, max, perMax int) error {
	key := string(n.Signer) + n.Nonce
	now, until := n.Now.Unix(), n.Expires.Unix()-1
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nonces == nil {
		m.nonces = map[string]spent{}
		m.perTree = map[string]int{}
	}
	if _, seen := m.nonces[key]; seen {
		return refuse(ReasonReplayed, "nonce %s was already used by %s", n.Nonce, n.DID)
	}
	if max <= 0 {
		max = DefaultMaxNonces
	}
	if perMax <= 0 {
		perMax = DefaultMaxNoncesPerTree
	}
	tree := n.tree()
	// Expiry is counted in whole seconds, so one sweep a second finds
	// every nonce that has left the window; a flood at the bounds costs
	// no more.
	if now != m.lastSweep {
		m.sweep(now)
	}
	if m.perTree[tree] >= perMax {
		return refuse(ReasonBusy, "%d nonces of %s's delegation tree are live, the most this verifier holds for one tree; retry later", m.perTree[tree], n.DID)
	}
	if len(m.nonces) >= max {
		return refuse(ReasonBusy, "%d nonces are live, the most this verifier holds; retry later", len(m.nonces))
	}
	// Fair share: a tree takes a nonce only while it holds fewer than
	// there are free places. Trees that take all they can (one holder
	// with many root-issued tokens is that many trees) each stop at
	// max/(T+1) for T of them, so the store never fills and a tree that
	// holds none always finds a place.
	if free := max - len(m.nonces); m.perTree[tree] >= free {
		return refuse(ReasonBusy, "%d nonces of %s's delegation tree are live, its share of the %d places free in this verifier; retry later", m.perTree[tree], n.DID, free)
	}
	m.perTree[tree]++
	m.nonces[key] = spent{until, tree}
	return nil
}

// sweep forgets nonces whose timestamps have left the window: those can no
// longer be replayed, since their signatures are now stale.
func (m *MemoryNonces) sweep(now int64) {
	m.lastSweep = now
	for k, s := range m.nonces {
		if s.until < now {
			delete(m.nonces, k)
			if m.perTree[s.tree]--; m.perTree[s.tree] <= 0 {
				delete(m.perTree, s.tree)
			}
		}
	}
}

// Len is the number of nonces held.
func (m *MemoryNonces) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.nonces)
}
