package attest

import (
	"bytes"
	"fmt"
	"io/fs"
	"slices"
	"sync"
)

// Store holds attestations by ID; each is checked by Attestation.Verify
// (structure and signature) when it is stored and when it is read. An
// attestation, once stored, is never replaced by a different one.
// Implementations are safe for concurrent use.
type Store interface {
	// Put verifies a (Attestation.Verify) and stores it. Storing an
	// attestation already held is a no-op; a different attestation with the
	// same ID is an error wrapping ErrConflict.
	Put(a *Attestation) error
	// Get returns the attestation with the given ID, its signature
	// verified. A missing attestation is an error wrapping fs.ErrNotExist.
	Get(id string) (*Attestation, error)
	// List returns the IDs of the stored attestations in ascending order.
	List() ([]string, error)
}

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Dir)(nil)
)

// Memory is a Store in memory. The zero value is ready to use.
type Memory struct {
	mu sync.RWMutex
	m  map[string][]byte // canonical JSON, so callers never share a value
}

// Put implements Store.
func (s *Memory) Put(a *Attestation) error {
	b, err := verifiedBytes(a)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[a.ID]; ok {
		if !bytes.Equal(old, b) {
			return fmt.Errorf("attestation %s: %w", a.ID, ErrConflict)
		}
		return nil
	}
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[a.ID] = b
	return nil
}

// Get implements Store.
func (s *Memory) Get(id string) (*Attestation, error) {
	s.mu.RLock()
	b, ok := s.m[id]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("attestation %q: %w", clip(id), fs.ErrNotExist)
	}
	return parseVerified(b, id)
}

// List implements Store.
func (s *Memory) List() ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]string, 0, len(s.m))
	for id := range s.m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// verifiedBytes verifies a and returns its canonical JSON.
func verifiedBytes(a *Attestation) ([]byte, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: nil attestation", ErrMalformed)
	}
	if err := a.Verify(); err != nil {
		return nil, err
	}
	return a.canonical()
}

// parseVerified parses and verifies stored bytes, which must hold the
// attestation with the given ID.
func parseVerified(b []byte, id string) (*Attestation, error) {
	a, pub, raw, err := parse(b)
	if err != nil {
		return nil, err
	}
	if err := a.checkSignature(pub, raw); err != nil {
		return nil, err
	}
	if a.ID != id {
		return nil, fmt.Errorf("%w: stored under %s but its id is %s", ErrMalformed, id, a.ID)
	}
	return a, nil
}
