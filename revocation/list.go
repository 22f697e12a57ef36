package revocation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/delegateos/delegateos/internal/strictjson"
)

// ErrMalformedList is wrapped when list bytes are not a JSON array of entries.
var ErrMalformedList = errors.New("malformed revocation list")

// List is an in-memory revocation list (§4.2) of verified entries, in the
// order they were added. The zero value is an empty list. It is safe for
// concurrent use.
type List struct {
	// n is len(entries), read without the lock so that Revoked on an
	// empty list takes no lock at all.
	n atomic.Int64

	mu      sync.RWMutex
	entries []Entry
	seen    map[Entry]struct{}
	// revokers lists, for each revocation ID, the revokedBy of every entry
	// naming it: all that Revoked needs.
	revokers map[string][]string
}

// NewList returns an empty list.
func NewList() *List { return &List{} }

// Add verifies e and adds it. Adding an entry that is already in the list
// does nothing.
func (l *List) Add(e Entry) error {
	if err := e.Verify(); err != nil {
		return err
	}
	l.add(e)
	return nil
}

// add adds an entry that has been verified.
func (l *List) add(e Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.seen[e]; dup {
		return
	}
	if l.seen == nil {
		l.seen = map[Entry]struct{}{}
		l.revokers = map[string][]string{}
	}
	l.seen[e] = struct{}{}
	if rs := l.revokers[e.RevocationID]; !slices.Contains(rs, e.RevokedBy) {
		l.revokers[e.RevocationID] = append(rs, e.RevokedBy)
	}
	l.entries = append(l.entries, e)
	l.n.Store(int64(len(l.entries)))
}

// RevokedBy reports whether the list holds an entry by by for the
// revocation ID id, whatever its time and scope: another such entry would
// change no decision.
func (l *List) RevokedBy(id, by string) bool { return l.revokedBy(id, by) }

// revokedBy is RevokedBy.
func (l *List) revokedBy(id, by string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Contains(l.revokers[id], by)
}

// contains reports whether exactly this entry (every field equal) is in
// the list, and therefore has been verified.
func (l *List) contains(e Entry) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.seen[e]
	return ok
}

// IsRevoked reports whether some entry names this revocation ID (§4.2),
// whoever made it and whatever its scope. Verifiers use Revoked, which
// applies the rules of the package documentation.
func (l *List) IsRevoked(id string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.revokers[id]) > 0
}

// Entries returns a copy of the entries in the order they were added.
func (l *List) Entries() []Entry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.entries)
}

// Len is the number of entries.
func (l *List) Len() int { return int(l.n.Load()) }

// Revoked implements dct.Revocations: blockIDs[i] is the revocation ID of
// block i of a token (0 is the authority) and signers[i] the principal ID
// that signed it. It returns the ID of the first block that revokes the
// token under the rules of the package documentation. It is called on
// every verification and does not allocate unless it fails.
func (l *List) Revoked(blockIDs, signers []string) (revocationID string, revoked bool, err error) {
	if l == nil {
		return "", false, errors.New("no revocation list (nil *revocation.List)")
	}
	if len(blockIDs) == 0 || len(blockIDs) != len(signers) {
		return "", false, fmt.Errorf("revocation check needs one signer per block, got %d blocks and %d signers", len(blockIDs), len(signers))
	}
	if l.n.Load() == 0 {
		return "", false, nil
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i, id := range blockIDs {
		for _, by := range l.revokers[id] {
			// Honoured only if the revoker signed this block or one
			// before it in this token; the scope does not matter.
			if slices.Contains(signers[:i+1], by) {
				return id, true, nil
			}
		}
	}
	return "", false, nil
}

// clone returns an independent copy; the entries need no new verification.
func (l *List) clone() *List {
	c := &List{}
	for _, e := range l.Entries() {
		c.add(e)
	}
	return c
}

// MarshalJSON writes the entries as a JSON array in the order they were
// added, the form of the reference implementation's toJSON.
func (l *List) MarshalJSON() ([]byte, error) {
	return marshalEntries(l.Entries(), false)
}

// fileBytes is the list as written to a file: the same JSON array with one
// entry per line, so that people and diff can read it.
func (l *List) fileBytes() ([]byte, error) {
	return marshalEntries(l.Entries(), true)
}

func marshalEntries(entries []Entry, lines bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('[')
	for i, e := range entries {
		if i > 0 {
			buf.WriteByte(',')
		}
		if lines {
			buf.WriteString("\n  ")
		}
		if err := enc.Encode(e); err != nil {
			return nil, err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
	}
	if lines && len(entries) > 0 {
		buf.WriteByte('\n')
	}
	buf.WriteByte(']')
	if lines {
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// jsonSpace is the whitespace JSON allows between tokens.
const jsonSpace = " \t\r\n"

// ParseList reads a JSON array of entries strictly (duplicate or
// differently cased member names, unknown members and trailing data are
// refused) and verifies every entry. Repeated entries are kept once.
func ParseList(data []byte) (*List, error) {
	return parseList(data, nil)
}

// parseList is ParseList, skipping the signature check of entries that are
// in known: those were verified when known was built.
func parseList(data []byte, known *List) (*List, error) {
	if len(data) > MaxListSize {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrMalformedList, len(data), MaxListSize)
	}
	if t := bytes.TrimLeft(data, jsonSpace); len(t) == 0 || t[0] != '[' {
		return nil, fmt.Errorf("%w: not a JSON array", ErrMalformedList)
	}
	var entries []Entry
	if err := strictjson.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedList, err)
	}
	l := &List{
		entries:  make([]Entry, 0, len(entries)),
		seen:     make(map[Entry]struct{}, len(entries)),
		revokers: make(map[string][]string, len(entries)),
	}
	for i, e := range entries {
		if known == nil || !known.contains(e) {
			if err := e.Verify(); err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
		}
		l.add(e)
	}
	return l, nil
}
