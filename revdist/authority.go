package revdist

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/revocation"
)

// ErrNotAuthorized is wrapped when an Authority refuses an entry's revoker.
var ErrNotAuthorized = errors.New("revoker not accepted")

// Authority decides whether a verifier takes an entry, whose signature has
// been verified, from its revoker.
type Authority interface {
	Authorize(e revocation.Entry) error
}

// Principals accepts entries from a fixed set of revokers, such as the
// trusted roots: a root may revoke any block of the tokens it issued.
type Principals map[string]struct{}

// NewPrincipals returns the set of the given principal IDs or did:keys.
func NewPrincipals(ids ...string) (Principals, error) {
	p := Principals{}
	for _, s := range ids {
		id, err := identity.NormalizePrincipal(s)
		if err != nil {
			return nil, err
		}
		p[id] = struct{}{}
	}
	return p, nil
}

// Authorize implements Authority.
func (p Principals) Authorize(e revocation.Entry) error {
	if _, ok := p[e.RevokedBy]; !ok {
		return fmt.Errorf("%w: %s is not among the %d principals this verifier takes revocations from", ErrNotAuthorized, e.RevokedBy, len(p))
	}
	return nil
}

// Tokens accepts an entry for a block of a token it was given when the
// revoker signed that block or one before it: the rule by which a verifier
// honours an entry. Give it the tokens the verifier has accepted. It holds
// at most Max tokens (1000 when zero), forgetting the oldest first. It is
// safe for concurrent use.
type Tokens struct {
	Max int

	mu sync.RWMutex
	// tokens are the blocks and signers of each token, oldest first; seen
	// holds their last blocks' revocation IDs, which identify them.
	tokens []tokenBlocks
	seen   map[string]bool
	// strs are the token strings AddString has recorded; it is emptied
	// when it grows past twice Max.
	strs map[string]bool
}

type tokenBlocks struct {
	key              string
	blockIDs, signer []string
}

// Add records a token the verifier has accepted.
func (t *Tokens) Add(tok *dct.Token) {
	ids, signers := tok.RevocationIDs(), tok.Signers()
	key := ids[len(ids)-1]
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	if t.seen[key] {
		return
	}
	if len(t.tokens) >= t.max() {
		delete(t.seen, t.tokens[0].key)
		t.tokens = slices.Delete(t.tokens, 0, 1)
	}
	t.seen[key] = true
	t.tokens = append(t.tokens, tokenBlocks{key: key, blockIDs: ids, signer: signers})
}

// AddString records a token, given as presented, that the verifier has
// accepted; one that does not parse is ignored. A token already recorded
// is not parsed again.
func (t *Tokens) AddString(token string) {
	t.mu.RLock()
	known := t.strs[token]
	t.mu.RUnlock()
	if known {
		return
	}
	tok, err := dct.Parse(token)
	if err != nil {
		return
	}
	t.Add(tok)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.strs == nil || len(t.strs) >= 2*t.max() {
		t.strs = map[string]bool{}
	}
	t.strs[token] = true
}

func (t *Tokens) max() int {
	if t.Max <= 0 {
		return 1000
	}
	return t.Max
}

// Authorize implements Authority.
func (t *Tokens) Authorize(e revocation.Entry) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, tb := range t.tokens {
		for i, id := range tb.blockIDs {
			if id == e.RevocationID && slices.Contains(tb.signer[:i+1], e.RevokedBy) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %s names no block of a token seen here that %s signed or issued", ErrNotAuthorized, e.RevocationID, e.RevokedBy)
}

// AnyOf accepts an entry that any of its authorities accepts.
type AnyOf []Authority

// Authorize implements Authority.
func (a AnyOf) Authorize(e revocation.Entry) error {
	errs := make([]error, 0, len(a))
	for _, x := range a {
		err := x.Authorize(e)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return fmt.Errorf("%w: no authority is configured", ErrNotAuthorized)
	}
	return errors.Join(errs...)
}
