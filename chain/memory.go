package chain

import (
	"sync"
	"time"
)

// Memory is a Store held in memory. The zero value is an empty store.
type Memory struct {
	mu sync.Mutex
	s  state
}

var (
	_ Store        = (*Memory)(nil)
	_ StatusReader = (*Memory)(nil)
)

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{} }

// Insert implements Store.
func (m *Memory) Insert(d Delegation) error {
	_, err := m.apply(&event{Op: opInsert, Delegation: &d})
	return err
}

// Get implements Store.
func (m *Memory) Get(id string) (Delegation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s.get(id)
}

// WithID implements Store.
func (m *Memory) WithID(id string) ([]Delegation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s.withID(id), nil
}

// Status implements StatusReader; it never fails.
func (m *Memory) Status(key string) (Status, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.s.status(key)
	return st, ok, nil
}

// List implements Store.
func (m *Memory) List() ([]Delegation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s.list(), nil
}

// Complete implements Store.
func (m *Memory) Complete(id, attestationID string, at time.Time) error {
	return m.end(opComplete, id, attestationID, at)
}

// Fail implements Store.
func (m *Memory) Fail(id, attestationID string, at time.Time) error {
	return m.end(opFail, id, attestationID, at)
}

// Revoke implements Store.
func (m *Memory) Revoke(id string, at time.Time) ([]string, error) {
	e, err := statusEvent(opRevoke, id, "", at)
	if err != nil {
		return nil, err
	}
	return m.apply(e)
}

// Close does nothing; a Memory stays usable.
func (m *Memory) Close() error { return nil }

func (m *Memory) end(op, id, attestationID string, at time.Time) error {
	e, err := statusEvent(op, id, attestationID, at)
	if err != nil {
		return err
	}
	_, err = m.apply(e)
	return err
}

func (m *Memory) apply(e *event) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s.apply(e)
}

// statusEvent builds a status change of the delegation ref names (its key,
// or an ID one delegation alone has) for the time given.
func statusEvent(op, ref, attestationID string, at time.Time) (*event, error) {
	s, err := formatTime(at)
	if err != nil {
		return nil, err
	}
	e := &event{Op: op, ID: ref, AttestationID: attestationID, At: s}
	if ValidKey(ref) {
		e.ID, e.Key = "", ref
	}
	return e, nil
}
