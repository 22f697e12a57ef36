package serve

import (
	"context"
	"sync"
	"time"
)

// byteBudget bounds the bytes of request bodies the server holds at once,
// across every connection and stream: a request takes its share before a
// byte of its body is read, and gives it back once the body is handed on.
// Those who wait are served in order of arrival, so a large body is not
// passed over for ever by small ones. Requests that bring no credential
// draw on a fraction of it (anonCap) and never wait: however many of them
// come, credentialed clients keep the rest.
type byteBudget struct {
	mu       sync.Mutex
	size     int64 // the bound
	used     int64
	anonCap  int64 // the bound on anonymous requests' share
	anonUsed int64
	credCap  int64            // the bound on one credential's share
	byCred   map[string]int64 // each credential's share taken or asked for
	waiters  []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once granted
}

func newByteBudget(size int64) *byteBudget {
	return &byteBudget{size: size, anonCap: size / 8, credCap: size / 4, byCred: map[string]int64{}}
}

// take waits at most wait for n bytes (n at most size) for the credential
// cred and reports whether it got them; it gives up early when ctx ends.
// A credential whose share would go over credCap is refused at once: one
// token holder cannot hold the whole budget with bodies it never sends.
func (b *byteBudget) take(ctx context.Context, n int64, wait time.Duration, cred string) bool {
	b.mu.Lock()
	if cred != "" {
		if b.byCred[cred]+n > b.credCap {
			b.mu.Unlock()
			return false
		}
		b.byCred[cred] += n
	}
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return true
	}
	wt := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, wt)
	b.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-wt.ready:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-wt.ready:
		// Granted as it gave up: it is the waiter's to use.
		return true
	default:
	}
	for i, x := range b.waiters {
		if x == wt {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.giveCredLocked(n, cred)
	// Those behind it may fit now that it no longer blocks the line.
	b.grantLocked()
	return false
}

// takeAnonymous takes n bytes for a request with no credential, at once or
// not at all: never while credentialed requests wait, never past anonCap.
func (b *byteBudget) takeAnonymous(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 || b.used+n > b.size || b.anonUsed+n > b.anonCap {
		return false
	}
	b.used += n
	b.anonUsed += n
	return true
}

// give returns n bytes taken (anonymous ones by takeAnonymous, cred's by
// take).
func (b *byteBudget) give(n int64, anonymous bool, cred string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if anonymous {
		b.anonUsed -= n
	}
	b.giveCredLocked(n, cred)
	b.grantLocked()
}

func (b *byteBudget) giveCredLocked(n int64, cred string) {
	if cred == "" {
		return
	}
	if b.byCred[cred] -= n; b.byCred[cred] <= 0 {
		delete(b.byCred, cred)
	}
}

// grantLocked hands out what is free to the waiters at the head of the line.
func (b *byteBudget) grantLocked() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.size {
		wt := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += wt.n
		close(wt.ready)
	}
}

// inUse is the bytes taken.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
