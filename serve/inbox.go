package serve

import (
	"io"
	"sync"
)

// inbox is an in-memory pipe with a buffer: a write queues its bytes and
// returns, without waiting for the reader's goroutine to take them (one
// hand-off less per request than io.Pipe), unless limit bytes are already
// queued: then it waits, so a reader that stops reading still holds its
// writers back. The writer's Close is EOF for the reader once the queue is
// read; the reader's closeRead makes every later write and read fail.
type inbox struct {
	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte
	limit  int
	closed bool  // by the writer
	rerr   error // set by the reader
}

func newInbox(limit int) *inbox {
	q := &inbox{limit: limit}
	q.cond.L = &q.mu
	return q
}

// Write queues p whole.
func (q *inbox) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.rerr == nil && !q.closed && len(q.buf) > 0 && len(q.buf)+len(p) > q.limit {
		q.cond.Wait()
	}
	switch {
	case q.rerr != nil:
		return 0, q.rerr
	case q.closed:
		return 0, io.ErrClosedPipe
	}
	q.buf = append(q.buf, p...)
	q.cond.Broadcast()
	return len(p), nil
}

// Read takes what is queued, waiting for something if nothing is.
func (q *inbox) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) == 0 && !q.closed && q.rerr == nil {
		q.cond.Wait()
	}
	switch {
	case q.rerr != nil:
		return 0, q.rerr
	case len(q.buf) == 0:
		return 0, io.EOF
	}
	n := copy(p, q.buf)
	q.buf = q.buf[:copy(q.buf, q.buf[n:])]
	if len(q.buf) == 0 && cap(q.buf) > 64<<10 {
		q.buf = nil // a burst's buffer is not kept
	}
	q.cond.Broadcast()
	return n, nil
}

// Close is the writer's: the reader reads what is queued, then EOF.
func (q *inbox) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
	return nil
}

// closeRead is the reader's: what is queued is dropped, and writes and
// reads fail with err from now on (waiting writes too).
func (q *inbox) closeRead(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rerr == nil {
		q.rerr = err
	}
	q.buf = nil
	q.cond.Broadcast()
}

// inboxReader is an inbox's reading end as an io.ReadCloser: Close is
// closeRead.
type inboxReader struct{ q *inbox }

func (r inboxReader) Read(p []byte) (int, error) { return r.q.Read(p) }

func (r inboxReader) Close() error {
	r.q.closeRead(io.ErrClosedPipe)
	return nil
}
