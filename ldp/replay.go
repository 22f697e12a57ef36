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
// of it through). One signer's keys (those of one scope, the part of a key
// before its second NUL: algorithm and signer, as Verifier.Spend writes
// them) hold at most MaxPerSigner places (zero: Max/8), so that one
// admitted peer sending cheap messages cannot fill the store and have
// every other peer's envelopes refused. The zero value is ready to use.
type MemoryReplay struct {
	Max          int
	MaxPerSigner int

	mu       sync.Mutex
	seen     map[string]time.Time
	bySigner map[string]int
}

// scopeOf is the signer scope of a key: up to its second NUL.
func scopeOf(k string) string {
	i := strings.IndexByte(k, 0)
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(k[i+1:], 0)
	if j < 0 {
		return k[:i]
	}
	return k[:i+1+j]
}

var _ ReplayStore = (*MemoryReplay)(nil)

// Spend implements ReplayStore.
func (m *MemoryReplay) Spend(_ context.Context, keys []string, now, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[string]time.Time{}
		m.bySigner = map[string]int{}
	}
	for _, k := range keys {
		if until, ok := m.seen[k]; ok && now.Before(until) {
			return refuse(ReasonReplayed, "%s was accepted before", strings.ReplaceAll(k, "\x00", " "))
		}
	}
	limit := m.Max
	if limit <= 0 {
		limit = DefaultMaxSeen
	}
	perSigner := m.MaxPerSigner
	if perSigner <= 0 {
		perSigner = max(limit/8, 2)
	}
	adds := map[string]int{}
	for _, k := range keys {
		adds[scopeOf(k)]++
	}
	over := func() (string, bool) {
		for sc, n := range adds {
			if m.bySigner[sc]+n > perSigner {
				return sc, true
			}
		}
		return "", len(m.seen)+len(keys) > limit
	}
	if _, full := over(); full {
		for k, until := range m.seen {
			if !now.Before(until) {
				delete(m.seen, k)
				m.forget(k)
			}
		}
		if sc, full := over(); full {
			if sc != "" {
				return refuse(ReasonBusy, "%d message IDs and nonces of %s are live, at most %d of one signer", m.bySigner[sc], strings.ReplaceAll(sc, "\x00", " "), perSigner)
			}
			return refuse(ReasonBusy, "%d message IDs and nonces are live, at most %d", len(m.seen), limit)
		}
	}
	for _, k := range keys {
		if _, ok := m.seen[k]; ok {
			// An expired key of the same name is spent again.
			m.forget(k)
		}
		m.seen[k] = expires
		m.bySigner[scopeOf(k)]++
	}
	return nil
}

// forget drops k from its signer's count. m.mu is held.
func (m *MemoryReplay) forget(k string) {
	sc := scopeOf(k)
	if m.bySigner[sc]--; m.bySigner[sc] <= 0 {
		delete(m.bySigner, sc)
	}
}

// Len is the number of keys held, expired ones included until swept.
func (m *MemoryReplay) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen)
}
