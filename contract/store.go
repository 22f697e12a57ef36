package contract

import (
	"bytes"
	"fmt"
	"io/fs"
	"slices"
	"sync"
)

// Store holds verified contracts by ID. A contract, once stored, is never
// replaced by a different one. Implementations are safe for concurrent use.
type Store interface {
	// Put verifies c and stores it. Storing a contract already held is a
	// no-op; a different contract with the same ID is an error wrapping
	// ErrConflict.
	Put(c *TaskContract) error
	// Get returns the contract with the given ID, verified. A missing
	// contract is an error wrapping fs.ErrNotExist.
	Get(id string) (*TaskContract, error)
	// List returns the IDs of the stored contracts in ascending order.
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
func (s *Memory) Put(c *TaskContract) error {
	b, err := verifiedBytes(c)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[c.ID]; ok {
		if !bytes.Equal(old, b) {
			return fmt.Errorf("contract %s: %w", c.ID, ErrConflict)
		}
		return nil
	}
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[c.ID] = b
	return nil
}

// Get implements Store.
func (s *Memory) Get(id string) (*TaskContract, error) {
	s.mu.RLock()
	b, ok := s.m[id]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("contract %q: %w", clip(id), fs.ErrNotExist)
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

// verifiedBytes verifies c and returns its canonical JSON.
func verifiedBytes(c *TaskContract) ([]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil contract", ErrMalformed)
	}
	if err := c.Verify(); err != nil {
		return nil, err
	}
	return c.canonical()
}

// parseVerified parses and verifies stored bytes, which must hold the
// contract with the given ID.
func parseVerified(b []byte, id string) (*TaskContract, error) {
	c, pub, raw, err := parse(b)
	if err != nil {
		return nil, err
	}
	if err := c.checkSignature(pub, raw); err != nil {
		return nil, err
	}
	if c.ID != id {
		return nil, fmt.Errorf("%w: stored under %s but its id is %s", ErrMalformed, id, c.ID)
	}
	return c, nil
}
