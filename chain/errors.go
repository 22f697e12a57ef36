package chain

import (
	"errors"
	"fmt"
	"io/fs"
)

var (
	// ErrMalformed is wrapped by every error about a record's or a log
	// line's own structure: IDs, principals, timestamps, status, the token's
	// encoding.
	ErrMalformed = errors.New("malformed delegation record")
	// ErrDuplicate is wrapped when a record's key is already in the store:
	// the same delegation is recorded. Another delegation with the same ID
	// is not a duplicate.
	ErrDuplicate = errors.New("this delegation is already recorded")
	// ErrAmbiguous is wrapped when a delegation is looked up by an ID that
	// more than one recorded delegation has: name it by its key.
	ErrAmbiguous = errors.New("more than one delegation has this ID; name it by its key")
	// ErrTerminal is matched by a *TransitionError: the delegation has
	// already ended and its status never changes again.
	ErrTerminal = errors.New("delegation has already ended")
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

func notFound(id string) error {
	return fmt.Errorf("delegation %s: %w", clip(id), fs.ErrNotExist)
}

// Invariant names a rule of the chain that a record broke.
type Invariant string

// The invariants of §8.2, in its order, and the rules this package adds.
const (
	// InvariantRoot (§8.2.1): a root has parentId del_000000000000 and
	// depth 0, and carries a root token (the authority block alone, with
	// parentDelegationId del_000000000000 and chainDepth 0).
	InvariantRoot Invariant = "root"
	// InvariantParent (§8.2.2): a child's parent is recorded.
	InvariantParent Invariant = "parent"
	// InvariantFrom (§8.2.2): child.from == parent.to.
	InvariantFrom Invariant = "from"
	// InvariantDepth (§8.2.3): child.depth == parent.depth + 1.
	InvariantDepth Invariant = "depth"
	// InvariantMaxDepth (§8.2.4): depth ≤ the root token's
	// authority.maxChainDepth.
	InvariantMaxDepth Invariant = "max_depth"
	// InvariantAttenuation (§8.2.5): the child's token is the parent's
	// token, byte for byte, followed by one or more attenuation blocks, the
	// first of them made by child.from.
	InvariantAttenuation Invariant = "attenuation"
	// InvariantToken: the record describes its token. Its To is the
	// token's last delegatee, its ID and ContractID the last block's
	// delegation and contract IDs, its From (for a root) the issuer, and
	// the token has one signature per block.
	InvariantToken Invariant = "token"
	// InvariantParentActive: only an active delegation may delegate.
	InvariantParentActive Invariant = "parent_active"
)

// Sentinels for errors.Is; an *InvariantError matches the sentinel of its
// invariant.
var (
	ErrRoot           = &InvariantError{Invariant: InvariantRoot}
	ErrNoParent       = &InvariantError{Invariant: InvariantParent}
	ErrFromMismatch   = &InvariantError{Invariant: InvariantFrom}
	ErrDepth          = &InvariantError{Invariant: InvariantDepth}
	ErrMaxDepth       = &InvariantError{Invariant: InvariantMaxDepth}
	ErrNotAttenuation = &InvariantError{Invariant: InvariantAttenuation}
	ErrTokenMismatch  = &InvariantError{Invariant: InvariantToken}
	ErrParentInactive = &InvariantError{Invariant: InvariantParentActive}
)

// InvariantError is a record refused because it would break an invariant
// of the chain.
type InvariantError struct {
	Invariant Invariant
	// ID is the refused record's ID.
	ID     string
	Detail string
}

func (e *InvariantError) Error() string {
	s := "delegation chain invariant " + string(e.Invariant)
	if e.ID != "" {
		s = "delegation " + e.ID + " breaks the " + string(e.Invariant) + " invariant"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is reports whether target is an *InvariantError of the same invariant.
func (e *InvariantError) Is(target error) bool {
	t, ok := target.(*InvariantError)
	return ok && t.Invariant == e.Invariant
}

func violation(inv Invariant, id, format string, args ...any) *InvariantError {
	return &InvariantError{Invariant: inv, ID: id, Detail: fmt.Sprintf(format, args...)}
}

// TransitionError is a status change refused because the delegation has
// already ended. It matches ErrTerminal.
type TransitionError struct {
	ID   string
	Key  string
	From Status // the status it has
	To   Status // the status asked for
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("delegation %s is already %s and cannot become %s", e.ID, e.From, e.To)
}

// Is reports whether target is ErrTerminal.
func (e *TransitionError) Is(target error) bool { return target == ErrTerminal }
