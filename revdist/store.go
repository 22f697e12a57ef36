package revdist

import (
	"errors"
	"sync"

	"github.com/delegateos/delegateos/revocation"
)

// Store is the revocation list a verifier decides with.
type Store interface {
	// Entries returns the entries in the order they were added. An error
	// (an unreadable list file) is reported, never read as an empty list.
	Entries() ([]revocation.Entry, error)
	// Len is the number of entries, without copying them (0 when the list
	// cannot be read).
	Len() int
	// Add stores an entry whose signature has been verified and whose
	// revoker was accepted. It reports whether the store did not already
	// hold an entry by the same revoker for the same block (which would
	// change no decision).
	Add(e revocation.Entry) (added bool, err error)
}

// FileStore is a list file, read through a revocation.File that a Gate may
// share: entries are appended with File.Append, which verifies and writes
// only the new entry (a push costs the same with 50,000 entries as with
// none), and are in force for the next decision.
type FileStore struct {
	// Path is the list file's path, as File was opened with.
	Path string
	File *revocation.File
}

var _ Store = (*FileStore)(nil)

// Entries implements Store.
func (s *FileStore) Entries() ([]revocation.Entry, error) {
	if err := s.File.Err(); err != nil {
		return nil, err
	}
	l := s.File.List()
	if err := s.File.Err(); err != nil {
		return nil, err
	}
	return l.Entries(), nil
}

// Len implements Store.
func (s *FileStore) Len() int { return s.File.Len() }

// Add implements Store.
func (s *FileStore) Add(e revocation.Entry) (bool, error) {
	if s.File == nil {
		return false, errors.New("no revocation list file")
	}
	return s.File.Append(e)
}

// MemStore is a Store in memory.
type MemStore struct {
	List *revocation.List
	mu   sync.Mutex
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{List: revocation.NewList()} }

// Entries implements Store.
func (s *MemStore) Entries() ([]revocation.Entry, error) { return s.List.Entries(), nil }

// Len implements Store.
func (s *MemStore) Len() int { return s.List.Len() }

// Add implements Store.
func (s *MemStore) Add(e revocation.Entry) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if holds(s.List, e) {
		return false, nil
	}
	return true, s.List.Add(e)
}

// holds reports whether l has an entry by e's revoker for e's block.
func holds(l *revocation.List, e revocation.Entry) bool {
	return l.RevokedBy(e.RevocationID, e.RevokedBy)
}
