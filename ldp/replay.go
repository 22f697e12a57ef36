package ldp

import (
	"context"
	"strings"
	"sync"
	"time"
)

// A ReplayStore remembers what verified envelopes used once: their
// message_id and nonce, each under the identity that signed. Spend returns
// nil when none of keys was in use and all are now held until expires;
// otherwise an *Error: ReasonReplayed when one was, ReasonBusy when the
// store is full. It is safe for concurrent use.
type ReplayStore interface {
	Spend(ctx context.Context, keys []string, now, expires time.Time) error
}

// MemoryReplay is a ReplayStore in one process's memory. It holds at most
// Max keys (zero: DefaultMaxSeen) and refuses a new envelope (busy) when
// that many are live, rather than forget one before its timestamp leaves
// the window (the reference's LRU forgets the oldest, which lets a replay
// of it through). The zero value is ready to use.
type MemoryReplay struct {
	Max int

	mu   sync.Mutex
	seen map[string]time.Time
}

var _ ReplayStore = (*MemoryReplay)(nil)

// Spend implements ReplayStore.
func (m *MemoryReplay) Spend(_ context.Context, keys []string, now, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[string]time.Time{}
	}
	for _, k := range keys {
		if until, ok := m.seen[k]; ok && now.Before(until) {
			return refuse(ReasonReplayed, "%s was accepted before", strings.ReplaceAll(k, "\x00", " "))
		}
	}
	max := m.Max
	if max <= 0 {
		max = DefaultMaxSeen
	}
	if len(m.seen)+len(keys) > max {
		for k, until := range m.seen {
			if !now.Before(until) {
				delete(m.seen, k)
			}
		}
		if len(m.seen)+len(keys) > max {
			return refuse(ReasonBusy, "%d message IDs and nonces are live, at most %d", len(m.seen), max)
		}
	}
	for _, k := range keys {
		m.seen[k] = expires
	}
	return nil
}

// Len is the number of keys held, expired ones included until swept.
func (m *MemoryReplay) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen)
}
