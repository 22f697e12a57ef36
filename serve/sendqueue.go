package serve

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegateos/delegateos/proxy"
)

// The bound on what a bridge holds for its upstream beside requests (which
// the server bounds per session): the client's notifications and its
// answers to the upstream's requests, sent one at a time in order.
const (
	maxQueuedNotifications     = 256
	maxQueuedNotificationBytes = 4 << 20
)

// droppedNotifications counts the messages bridges dropped because their
// queue was full.
var droppedNotifications atomic.Int64

// UpstreamNotificationsDropped is the number of client messages other than
// requests (notifications, answers to the upstream's requests) that the
// bridges to HTTP upstreams of this process dropped: their session's queue
// to a slow upstream was full.
func UpstreamNotificationsDropped() int64 { return droppedNotifications.Load() }

// sendQueue holds the messages one bridge sends to its upstream one at a
// time: a client that floods notifications at a slow upstream fills its
// own queue, and what it sends beyond is dropped, not given a goroutine
// and a connection each.
type sendQueue struct {
	mu      sync.Mutex
	cond    sync.Cond
	frames  []queued
	bytes   int // of the frames queued by push
	answers int // frames queued by pushAnswer
	closed  bool
}

type queued struct {
	frame  []byte
	m      proxy.Message
	answer bool
}

func newSendQueue() *sendQueue {
	q := &sendQueue{}
	q.cond.L = &q.mu
	return q
}

// push queues a message; it reports false, and drops it, when the queue is
// full or closed.
func (q *sendQueue) push(frame []byte, m proxy.Message) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	// One frame over the byte bound (it is within the largest message the
	// server takes) goes when nothing else waits.
	if len(q.frames) > 0 && (len(q.frames)-q.answers >= maxQueuedNotifications || q.bytes+len(frame) > maxQueuedNotificationBytes) {
		droppedNotifications.Add(1)
		return false
	}
	q.frames = append(q.frames, queued{frame, m, false})
	q.bytes += len(frame)
	q.cond.Signal()
	return true
}

// pushAnswer queues an answer to one of the upstream's requests outside
// the bounds of push: the caller bounds those (maxAsked). It reports false
// when the queue is closed.
func (q *sendQueue) pushAnswer(frame []byte, m proxy.Message) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.frames = append(q.frames, queued{frame, m, true})
	q.answers++
	q.cond.Signal()
	return true
}

// pop takes the oldest message, waiting for one; false once the queue is
// closed.
func (q *sendQueue) pop() (queued, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.frames) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return queued{}, false
	}
	x := q.frames[0]
	q.frames[0] = queued{}
	q.frames = q.frames[1:]
	if x.answer {
		q.answers--
	} else {
		q.bytes -= len(x.frame)
	}
	return x, true
}

// close drops what is still queued and ends pop.
func (q *sendQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.frames, q.bytes, q.answers = nil, 0, 0
	q.cond.Broadcast()
}

// run sends what is queued, in order, until the queue is closed.
func (q *sendQueue) run(ctx context.Context, b *bridge) {
	for {
		x, ok := q.pop()
		if !ok {
			return
		}
		sctx, cancel := context.WithTimeout(ctx, notificationTimeout)
		b.send(sctx, x.frame, x.m)
		cancel()
	}
}

// notificationTimeout bounds the POST of one queued message (a server
// answers it 202 at once): a server that holds one does not hold the
// session's later notifications, its cancellations among them, for ever.
const notificationTimeout = 30 * time.Second
