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

// A SharedReplayStore also counts keys in a share other than their
// signer's: SpendShared is Spend with every key counted in share (a
// delegation tree, whose holders may sign with many keys), so that the
// holders of one token cannot take every place by delegating to fresh
// keys. Replays are still told by the keys themselves.
type SharedReplayStore interface {
	ReplayStore
	SpendShared(ctx context.Context, share string, keys []string, now, expires time.Time) error
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

	mu   sync.Mutex
	seen map[string]seenKey
	// bySigner counts the live keys of each share: a signer's scope, or
	// the share SpendShared named.
	bySigner map[string]int
}

// seenKey is a spent key: until when, and the share it is counted in.
type seenKey struct {
	until time.Time
	share string
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

var _ SharedReplayStore = (*MemoryReplay)(nil)

// Spend implements ReplayStore: keys are counted in their signer's share.
func (m *MemoryReplay) Spend(ctx context.Context, keys []string, now, expires time.Time) error {
	return m.SpendShared(ctx, "", keys, now, expires)
}

// SpendShared implements SharedReplayStore; share "" is the keys'
// signers'. A share holds at most MaxPerSigner places.
func (m *MemoryReplay) SpendShared(_ context.Context, share string, keys []string, now, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[string]seenKey{}
		m.bySigner = map[string]int{}
	}
	shareOf := func(k string) string {
		if share != "" {
			return "share\x00" + share
		}
		return scopeOf(k)
	}
	for _, k := range keys {
		if sk, ok := m.seen[k]; ok && now.Before(sk.until) {
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
		adds[shareOf(k)]++
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
		for k, sk := range m.seen {
			if !now.Before(sk.until) {
				delete(m.seen, k)
				m.forget(sk.share)
			}
		}
		if sc, full := over(); full {
			if sc != "" {
				return refuse(ReasonBusy, "%d message IDs and nonces of %s are live, at most %d of one signer or delegation tree", m.bySigner[sc], strings.ReplaceAll(sc, "\x00", " "), perSigner)
			}
			return refuse(ReasonBusy, "%d message IDs and nonces are live, at most %d", len(m.seen), limit)
		}
	}
	for _, k := range keys {
		if sk, ok := m.seen[k]; ok {
			// An expired key of the same name is spent again.
			m.forget(sk.share)
		}
		m.seen[k] = seenKey{expires, shareOf(k)}
		m.bySigner[shareOf(k)]++
	}
	return nil
}

// forget drops a key from the count of its share sc. m.mu is held.
func (m *MemoryReplay) forget(sc string) {
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
