package budget

import "sync"

// Memory is a Store held in memory, for tests and for a proxy that may
// forget spend when it exits. The zero value is an empty store.
type Memory struct {
	mu sync.Mutex
	l  ledger
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{} }

// Reserve implements Store.
func (m *Memory) Reserve(levels []Level, cost int64) (*Reservation, error) {
	keys, err := checkReserve(levels, cost)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.l.admit(levels, cost); err != nil {
		return nil, err
	}
	return m.l.hold(keys, cost), nil
}

// Commit implements Store.
func (m *Memory) Commit(r *Reservation, actual int64) error {
	if err := checkActual(actual); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.l.end(r); err != nil {
		return err
	}
	m.l.add(r.keys, actual-r.cost)
	return nil
}

// Release implements Store.
func (m *Memory) Release(r *Reservation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.l.end(r); err != nil {
		return err
	}
	m.l.add(r.keys, -r.cost)
	return nil
}

// Spent implements Store.
func (m *Memory) Spent(key string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l.spent[key]
}

// Close does nothing; a Memory stays usable.
func (m *Memory) Close() error { return nil }
