package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/proxy"
)

// Session is one MCP session as Options.Authorize and Options.Relay see it.
type Session struct {
	// ID is the Mcp-Session-Id.
	ID string
	// Token is the DCT the session's client presented in its
	// Authorization header when it initialized ("" if none): the relay's
	// session token (proxy.Config.SessionToken) unless Options.Relay
	// decides otherwise.
	Token string
	// LDPFront says the session serves the server's LDP front only (its
	// in-process requests, marked by FromLDPFront): no client's request
	// shares its relay.
	LDPFront bool
}

// session is a running MCP session: its relay and the routes of its
// in-flight requests.
type session struct {
	Session
	srv     *Server
	log     *zap.Logger
	cred    [32]byte // the hash of the credential it was created with (see credential)
	tree    string   // the delegation tree of its client's token, if any
	credKey string   // its client's token in canonical spelling (credentialKey), if any
	// shared: it serves stateless requests (no Mcp-Session-Id), and its id
	// is never sent to a client.
	shared bool

	inMu sync.Mutex
	in   *inbox // the relay's client input

	mu       sync.Mutex
	routes   map[string]*stream // by the raw id of the request awaiting its response
	progress map[string]*stream // by raw progress token
	streams  map[int64]*stream  // resumable streams by id; 0 is the standalone one
	open     []*stream          // POST streams still waiting for a response, oldest first
	// answered holds POST streams whose response came but was not yet
	// written (their client went away, and may resume), oldest first.
	answered []*stream
	next     int64 // the id of the next POST stream
	inflight int
	last     time.Time // the start or end of the last request
	seen     time.Time // when a response last stopped writing a stream
	ended    bool      // the relay has stopped
	endMsg   string    // why, for requests still waiting
	closing  bool      // its input is closed (DELETE, reaped, draining)
	done     chan struct{}
	// ready is closed once a shared session's upstream is initialized (or
	// that is given up): client frames wait for it. Nil for other sessions.
	ready     chan struct{}
	readyOnce sync.Once
}

func newSessionID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// maxQueued bounds the bytes of frames fed to a relay and not yet read by
// it: beyond, feeding waits for the relay.
const maxQueued = 1 << 20

// start runs the session's relay. Frames are fed to it through an inbox
// (the handler does not wait for the relay's goroutine to take them), and
// what the relay writes is routed as it is written, in the relay's own
// goroutine (no pipe and no goroutine in between: one hand-off less per
// call).
func (s *session) start(ctx context.Context) {
	s.in = newInbox(maxQueued)
	s.streams[0] = newStream(s, 0)
	if s.shared {
		// Its clients never initialize: the relay initializes the upstream
		// as a session's client would, before their first frame. An
		// upstream that keeps to the lifecycle sends nothing of its own,
		// progress included, until notifications/initialized.
		s.ready = make(chan struct{})
		s.in.Write([]byte(sharedInitialize + "\n"))
		time.AfterFunc(sharedInitWait, s.markReady)
	}
	go func() {
		out := &router{s: s}
		err := s.srv.opts.Relay(ctx, &s.Session, s.in, out)
		s.in.closeRead(io.ErrClosedPipe)
		out.flush()
		s.end(err)
	}()
}

// router is the relay's client output: it splits what the relay writes
// into lines and routes each.
type router struct {
	s       *session
	partial []byte
}

func (r *router) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.partial = append(r.partial, p...)
			break
		}
		line := p[:i]
		if len(r.partial) > 0 {
			line = append(r.partial, line...)
			r.partial = nil
		} else {
			line = bytes.Clone(line)
		}
		if f := bytes.TrimRight(line, "\r"); len(f) > 0 {
			r.s.route(f)
		}
		p = p[i+1:]
	}
	return n, nil
}

// flush routes an unterminated last line.
func (r *router) flush() {
	if f := bytes.TrimRight(r.partial, "\r\n"); len(f) > 0 {
		r.s.route(f)
	}
	r.partial = nil
}

// route delivers one frame from the relay: a response to the stream of
// the request it answers, progress to the stream of the request that
// asked for it, anything else to the standalone stream if a client reads
// it, else to the newest request still open, else to the standalone
// stream's backlog.
func (s *session) route(frame []byte) {
	m, err := proxy.ReadRelayMessage(frame)
	if err == nil && m.Kind == proxy.KindResponse && s.initializing() && idKey(m.ID) == sharedInitKey {
		// The answer to the shared relay's own initialize: no client
		// frame has been fed yet, so no request of theirs is answered.
		if isResult(frame) {
			s.in.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
		} else {
			s.log.Warn("the upstream refused the shared relay's initialize; its requests go on without", zap.ByteString("response", frame))
		}
		s.markReady()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && m.Kind == proxy.KindResponse {
		if st := s.routes[idKey(m.ID)]; st != nil {
			s.finish(st)
			st.add(frame, true)
			s.boundAnswered()
			return
		}
		s.log.Warn("a response from the relay answers no request in flight; sent on the standalone stream", zap.ByteString("id", m.ID))
	} else if err == nil && m.Kind == proxy.KindNotification && m.Method == "notifications/progress" {
		if tok := progressToken(frame); tok != "" {
			if st := s.progress[tok]; st != nil && !st.final {
				st.add(frame, false)
				return
			}
		}
	}
	if s.shared {
		// Its requests are different clients' (MCP 2026-07-28 has no
		// server-to-client requests outside a result, and no standalone
		// stream without a session): a message that names none of them is
		// none of theirs to read.
		s.log.Debug("a server message for no request of a shared session dropped", zap.String("method", m.Method))
		return
	}
	s.defaultStream().add(frame, false)
}

// defaultStream is where a server message that names no request goes;
// the caller holds the lock.
func (s *session) defaultStream() *stream {
	std := s.streams[0]
	if std.attached || len(s.open) == 0 {
		return std
	}
	return s.open[len(s.open)-1]
}

// finish takes a request's stream out of the routes; the caller holds the
// lock.
func (s *session) finish(st *stream) {
	delete(s.routes, st.key)
	if st.progress != "" && s.progress[st.progress] == st {
		delete(s.progress, st.progress)
	}
	s.open = removeStream(s.open, st)
	s.answered = append(s.answered, st)
	if len(s.answered) > maxAnswered {
		// A client that keeps abandoning requests cannot make the
		// session keep their answers without bound.
		old := s.answered[0]
		s.answered = s.answered[1:]
		delete(s.streams, old.id)
	}
	s.inflight--
	s.last = time.Now() // idle from the end of its last request
	s.srv.callDone()
}

// progressToken is params.progressToken of a progress notification, as
// raw JSON.
func progressToken(frame []byte) string {
	var m struct {
		Params struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"params"`
	}
	if json.Unmarshal(frame, &m) != nil {
		return ""
	}
	if len(m.Params.Token) == 0 {
		return ""
	}
	return idKey(m.Params.Token)
}

// requestProgressToken is params._meta.progressToken of a request.
func requestProgressToken(frame []byte) string {
	if !bytes.Contains(frame, []byte(`"progressToken"`)) {
		return "" // the common case, without decoding the frame
	}
	var m struct {
		Params struct {
			Meta struct {
				Token json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(frame, &m) != nil {
		return ""
	}
	if len(m.Params.Meta.Token) == 0 {
		return ""
	}
	return idKey(m.Params.Meta.Token)
}

// idKey is what a request is routed by: the relay's key for its id, so
// that two spellings of one id (a string with and without escapes) are
// one request here as they are in the relay, and a cancellation or an
// answer that names it by either finds it.
func idKey(raw []byte) string {
	if k, ok := proxy.RequestKey(raw); ok {
		return k
	}
	return "raw:" + string(raw)
}

// Why begin did not take a request (with errServerBusy and errSessionBusy).
var (
	errEnded     = errors.New("session ended")
	errDuplicate = errors.New("a request with this id is already in flight in this session")
	// errProgressInUse: in a shared session, another request in flight
	// holds the progress token, and its progress is not this one's to see.
	errProgressInUse = errors.New("a request with this progress token is already in flight: use another token")
)

// begin registers a request's stream before its frame is fed to the
// relay, so that its answer finds it.
func (s *session) begin(id []byte, frame []byte) (*stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.closing {
		return nil, errEnded
	}
	key := idKey(id)
	if s.routes[key] != nil {
		return nil, errDuplicate
	}
	tok := requestProgressToken(frame)
	if s.shared && tok != "" && s.progress[tok] != nil {
		return nil, errProgressInUse
	}
	if lim := s.srv.opts.MaxSessionCalls; lim > 0 && s.inflight >= lim {
		return nil, errSessionBusy
	}
	if !s.srv.callBegin() {
		return nil, errServerBusy
	}
	s.next++
	st := newStream(s, s.next)
	st.reqID, st.key = string(id), key
	if tok != "" && s.progress[tok] == nil {
		st.progress = tok
		s.progress[tok] = st
	}
	s.routes[key] = st
	s.streams[st.id] = st
	s.open = append(s.open, st)
	s.inflight++
	s.last = time.Now()
	return st, nil
}

// abandonedSince reports whether the session's client has left it: it
// has sent no request since t, and no response has written any of its
// streams since t. The caller holds the lock.
func (s *session) abandonedSince(t time.Time) bool {
	if s.last.After(t) || s.seen.After(t) {
		return false
	}
	for _, st := range s.streams {
		if st.attached {
			return false
		}
	}
	return true
}

// taking reports whether the session still takes requests.
func (s *session) taking() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended && !s.closing
}

// The initialize a shared relay sends its upstream, and how long its
// clients' frames wait for the answer before they go on without it.
const (
	sharedInitialize = `{"jsonrpc":"2.0","id":"delegateos/shared-initialize","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"delegateos","version":"1"}}}`
	sharedInitWait   = 10 * time.Second
)

// sharedInitKey is the route key of sharedInitialize's id.
var sharedInitKey = idKey([]byte(`"delegateos/shared-initialize"`))

// initializing reports whether a shared session waits for its upstream's
// answer to its initialize.
func (s *session) initializing() bool {
	if s.ready == nil {
		return false
	}
	select {
	case <-s.ready:
		return false
	default:
		return true
	}
}

func (s *session) markReady() {
	if s.ready != nil {
		s.readyOnce.Do(func() { close(s.ready) })
	}
}

// feed writes one frame into the relay.
func (s *session) feed(frame []byte) error {
	if s.ready != nil {
		<-s.ready
	}
	s.inMu.Lock()
	defer s.inMu.Unlock()
	// The inbox copies it: the newline may go in frame's spare capacity.
	_, err := s.in.Write(append(frame, '\n'))
	return err
}

// abandon answers a request whose frame could not be fed.
func (s *session) abandon(st *stream, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.final {
		return
	}
	s.finish(st)
	st.add(proxy.ErrorFrame([]byte(st.reqID), gate.CodeInternalError, msg), true)
}

// delivered forgets a stream whose final event was written.
func (s *session) delivered(st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.delivered = true
	delete(s.streams, st.id)
	s.answered = removeStream(s.answered, st)
}

// maxAnswered bounds the answered streams a session keeps for clients
// that may resume them, and maxAnsweredBytes the bytes they hold.
const (
	maxAnswered      = 64
	maxAnsweredBytes = 16 << 20
)

// boundAnswered drops the oldest answered streams while together they hold
// more than maxAnsweredBytes (never the newest): a client that abandons
// requests with large answers cannot make the session keep them all. The
// caller holds the lock.
func (s *session) boundAnswered() {
	total := 0
	for _, st := range s.answered {
		total += st.size
	}
	for total > maxAnsweredBytes && len(s.answered) > 1 {
		old := s.answered[0]
		s.answered = s.answered[1:]
		delete(s.streams, old.id)
		total -= old.size
		s.log.Warn("a client is not reading its answers: dropping the oldest")
	}
}

func removeStream(list []*stream, st *stream) []*stream {
	for i, o := range list {
		if o == st {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// close ends the session's input: the relay shuts its upstream down and
// settles its calls, then end runs.
func (s *session) close(why string) {
	s.mu.Lock()
	already := s.closing
	s.closing = true
	if s.endMsg == "" {
		s.endMsg = why
	}
	s.mu.Unlock()
	if already {
		return
	}
	s.markReady() // nothing more waits for the upstream's initialize
	s.log.Info("closing the session", zap.String("reason", why))
	// The requests still in flight are cancelled first, so that the relay
	// settles each as a cancellation (charged what it reserved: the
	// upstream may have done the work), not by the error the upstream
	// answers when its input closes. A relay that does not take them in
	// time does not hold the close up.
	cancelled := make(chan struct{})
	go func() { defer close(cancelled); s.cancelOpen(why) }()
	select {
	case <-cancelled:
	case <-time.After(cancelGrace):
	}
	// Not under inMu: a feed blocked on a relay that stopped reading
	// (its upstream is not reading either) must not hold the close up;
	// closing the pipe ends that write too.
	s.in.Close()
}

// cancelGrace bounds how long closing a session waits for the relay to
// take the cancellations of its requests in flight.
const cancelGrace = time.Second

// cancelOpen answers every request in flight with an error saying why the
// session is closing, and cancels it in the relay.
func (s *session) cancelOpen(why string) {
	s.mu.Lock()
	var ids []string
	for _, st := range append([]*stream(nil), s.open...) {
		s.finish(st)
		st.add(proxy.ErrorFrame([]byte(st.reqID), gate.CodeInternalError, "the session was closed before the upstream answered: "+why), true)
		ids = append(ids, st.reqID)
	}
	s.mu.Unlock()
	for _, id := range ids {
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
			"params": map[string]any{"requestId": json.RawMessage(id), "reason": why}})
		if err := s.feed(msg); err != nil {
			return
		}
	}
}

// end runs once the relay has stopped: every request still waiting is
// answered with an error, every stream closed, and the session forgotten.
func (s *session) end(err error) {
	var exit *proxy.UpstreamExitError
	msg := ""
	s.mu.Lock()
	switch {
	case errors.As(err, &exit):
		msg = "the session's upstream MCP server exited (" + exit.Error() + "); start a new session"
		s.srv.upstreamCrashed()
	case err != nil:
		msg = "the session's relay stopped: " + err.Error() + "; start a new session"
	case s.endMsg != "":
		msg = s.endMsg
	default:
		msg = "the session ended"
	}
	s.ended = true
	s.endMsg = msg
	s.markReady()
	for _, st := range append([]*stream(nil), s.open...) {
		s.finish(st)
		st.add(proxy.ErrorFrame([]byte(st.reqID), gate.CodeInternalError, msg+" before the upstream answered"), true)
	}
	for _, st := range s.streams {
		st.signal()
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Error("session failed", zap.Error(err))
	} else {
		s.log.Info("session ended")
	}
	s.srv.forget(s)
	close(s.done)
}

// cancel tells the relay the client gave up a request still in flight.
func (s *session) cancel(st *stream) {
	if !s.cancelled([]byte(st.reqID)) {
		return
	}
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": json.RawMessage(st.reqID), "reason": "the client closed the request's stream"}})
	if err := s.feed(msg); err != nil {
		s.log.Debug("cancelling a request: the relay has stopped", zap.Error(err))
	}
}

// cancelled ends the stream of a request the client cancelled: no
// response will come for it (the relay settles it). It reports whether
// the request was in flight.
func (s *session) cancelled(id []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.routes[idKey(id)]
	if st == nil {
		return false
	}
	s.finish(st)
	st.final = true
	st.signal()
	return true
}
