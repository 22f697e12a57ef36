package serve

import (
	"math"
	"strconv"
	"strings"
)

// stream is one SSE stream of a session: the standalone stream (id 0, the
// one GET opens) or the stream of one POSTed request. It holds the events
// routed to it until they are written, and the last few written ones, so
// that a client that lost the connection can resume with Last-Event-ID.
// The session's lock guards every field.
type stream struct {
	id   int64
	sess *session
	// events holds the events of sequence numbers base, base+1, ...; sent
	// is the first one the client has not been written.
	events []event
	base   int64
	sent   int64
	// size is the bytes of the events held.
	size int
	// final: the request's response is the last event; no more come.
	final bool
	// delivered: the final event was written; the stream is gone.
	delivered bool
	// writer counts the HTTP responses that have written this stream: the
	// one whose number is current writes, an older one returns.
	writer int
	// attached: an HTTP response is writing this stream now.
	attached bool
	// taken is closed when another response takes the stream over.
	taken chan struct{}
	wake  chan struct{}
	// reqID is the raw id of the request a POST stream answers;
	// progress is its _meta.progressToken (raw JSON), if any; key is
	// idKey(reqID).
	reqID, progress, key string
}

// event is one message on a stream.
type event struct {
	seq  int64
	data []byte
}

// Bounds on what a stream keeps.
const (
	// keepWritten is how many written events a stream keeps for replay.
	keepWritten = 32
	// maxUnsent bounds the events waiting for a client; beyond it the
	// oldest are dropped (a client that never reads cannot grow memory).
	maxUnsent = 1024
	// maxStreamBytes bounds the bytes a stream holds; beyond it the oldest
	// events are dropped (never the last one).
	maxStreamBytes = 32 << 20
)

func newStream(s *session, id int64) *stream {
	// Sequence numbers start at 1: the priming event's id (0) names the
	// point before the first message.
	return &stream{id: id, sess: s, base: 1, sent: 1, wake: make(chan struct{}, 1)}
}

// add appends an event; the caller holds the session's lock.
func (st *stream) add(data []byte, final bool) {
	seq := st.base + int64(len(st.events))
	st.events = append(st.events, event{seq: seq, data: data})
	if final {
		st.final = true
	}
	st.size += len(data)
	if unsent := seq + 1 - st.sent; unsent > maxUnsent {
		drop := int(unsent - maxUnsent)
		st.sess.srv.log.Warn("a stream's client is not reading: dropping its oldest events")
		st.sent += int64(drop)
	}
	st.trim()
	if st.size > maxStreamBytes && len(st.events) > 1 {
		st.sess.srv.log.Warn("a stream's client is not reading: dropping its oldest events")
		for st.size > maxStreamBytes && len(st.events) > 1 {
			st.size -= len(st.events[0].data)
			st.events = st.events[1:]
			st.base++
		}
		st.sent = max(st.sent, st.base)
	}
	st.signal()
}

// signal wakes the response writing the stream, if any.
func (st *stream) signal() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// trim forgets written events beyond keepWritten.
func (st *stream) trim() {
	keepFrom := st.sent - keepWritten
	if n := keepFrom - st.base; n > 0 {
		if n > int64(len(st.events)) {
			n = int64(len(st.events))
		}
		for _, ev := range st.events[:n] {
			st.size -= len(ev.data)
		}
		st.events = append(st.events[:0:0], st.events[n:]...)
		st.base += n
	}
}

// unsent returns the events not yet written; the caller holds the lock.
func (st *stream) unsent() []event {
	from := st.sent - st.base
	if from < 0 {
		from = 0
	}
	if from >= int64(len(st.events)) {
		return nil
	}
	return st.events[from:]
}

// appendEventID appends the SSE id of an event: the stream and its
// sequence number.
func appendEventID(b []byte, streamID, seq int64) []byte {
	return strconv.AppendInt(append(strconv.AppendInt(b, streamID, 10), '-'), seq, 10)
}

// parseEventID reads an id appendEventID wrote. A sequence number of
// 2^63−1 is none the server writes, and resuming after it would wrap.
func parseEventID(s string) (streamID, seq int64, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	var err1, err2 error
	streamID, err1 = strconv.ParseInt(a, 10, 64)
	seq, err2 = strconv.ParseInt(b, 10, 64)
	return streamID, seq, err1 == nil && err2 == nil && streamID >= 0 && seq >= 0 && seq < math.MaxInt64
}
