package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// CallTimeout bounds each request Context is used for.
const CallTimeout = 30 * time.Second

// WaitTimeout is how long Eventually and the Wait methods wait: a hang
// detector, not a measure (a loaded 2-core machine took more than 10 s to
// see a proxy write back an ended delegation after a FLUSHALL).
const WaitTimeout = 60 * time.Second

// Context returns a context that ends with the test or after CallTimeout.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), CallTimeout)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every 10ms until it holds, and fails the test if it
// does not within WaitTimeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", WaitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Buffer is a bytes.Buffer safe for concurrent use: a process's stderr.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// MustJSON is v as JSON, or "" if it cannot be encoded.
func MustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
