package serve

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/proxy"
)

// The transport's headers.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-Id"
)

// ProtocolVersions are the MCP revisions whose Streamable HTTP transport
// this front speaks; a request naming another in MCP-Protocol-Version is
// refused.
var ProtocolVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

// statelessStyle reports whether a request without Mcp-Session-Id is of
// the stateless style of MCP 2026-07-28, which has no protocol-level
// session: server/discover, or a request that names that revision (or a
// later one) in MCP-Protocol-Version.
func statelessStyle(r *http.Request, m proxy.Message) bool {
	return m.Method == "server/discover" || r.Header.Get(HeaderProtocolVersion) >= "2026-07-28"
}

func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if why := s.hosts.check(r.Host, r.Header.Values("Origin")); why != "" {
		s.log.Warn("request refused", zap.String("reason", why), zap.String("host", r.Host), zap.Strings("origin", r.Header.Values("Origin")))
		httpError(w, http.StatusForbidden, nil, why)
		return
	}
	if v := r.Header.Get(HeaderProtocolVersion); v != "" && !knownVersion(v) {
		httpError(w, http.StatusBadRequest, nil, "unsupported "+HeaderProtocolVersion+": "+v+" (this server speaks "+strings.Join(ProtocolVersions, ", ")+")")
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.servePost(w, r)
	case http.MethodGet:
		s.serveGet(w, r)
	case http.MethodDelete:
		s.serveDelete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		httpError(w, http.StatusMethodNotAllowed, nil, "use POST, GET or DELETE")
	}
}

func knownVersion(v string) bool {
	for _, k := range ProtocolVersions {
		if v == k {
			return true
		}
	}
	return false
}

// httpError answers with an HTTP status and a JSON-RPC error body.
func httpError(w http.ResponseWriter, status int, id []byte, msg string) {
	code := proxy.CodeInvalidRequest
	if status >= 500 {
		code = gate.CodeInternalError
	}
	writeJSON(w, status, proxy.ErrorFrame(id, code, msg))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// accepts reports whether an Accept header lists the media type (or a
// wildcard covering it).
func accepts(header []string, want string) bool {
	major, _, _ := strings.Cut(want, "/")
	for _, h := range header {
		for rest, more := h, true; more; {
			var part string
			part, rest, more = strings.Cut(rest, ",")
			part = strings.TrimSpace(part)
			if !strings.Contains(part, ";") {
				// A bare media type matches as mime.ParseMediaType
				// would read it (case-folded), without its allocations.
				if asciiEqualFold(part, want) || part == "*/*" || (len(part) == len(major)+2 && asciiEqualFold(part[:len(major)], major) && part[len(major):] == "/*") {
					return true
				}
				continue
			}
			mt, _, err := mime.ParseMediaType(part)
			if err != nil {
				continue
			}
			if mt == want || mt == "*/*" || mt == major+"/*" {
				return true
			}
		}
	}
	return false
}

// bearer is the token of an "Authorization: Bearer" header, or "".
func bearer(auth string) string {
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// refuseUnread marks an answer given before the request's body is read
// (if it has one) as the connection's last: net/http would otherwise wait
// for the body (up to 256 KiB of it, until the read deadline) before it
// answers, and a client that declared a body it does not send would hold
// the connection and a goroutine for ReadTimeout each time.
func refuseUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}

// session finds the session a request names and checks the request
// presents the credential the session was created with; it answers the
// request itself when it returns nil.
func (s *Server) session(w http.ResponseWriter, r *http.Request) *session {
	id := r.Header.Get(HeaderSessionID)
	if id == "" {
		refuseUnread(w, r)
		httpError(w, http.StatusBadRequest, nil, "missing "+HeaderSessionID+" header: send initialize first")
		return nil
	}
	sess := s.lookup(id)
	if sess == nil {
		refuseUnread(w, r)
		httpError(w, http.StatusNotFound, nil, "no such session (it ended, or never existed): start a new one with initialize")
		return nil
	}
	c, _, err := credential(r)
	if err != nil {
		refuseUnread(w, r)
		httpError(w, http.StatusUnauthorized, nil, err.Error())
		return nil
	}
	cred := sha256.Sum256([]byte(c))
	if subtle.ConstantTimeCompare(cred[:], sess.cred[:]) != 1 {
		s.log.Warn("request refused: its Authorization header is not the one its session was created with", zap.String("session", id[:min(8, len(id))]))
		refuseUnread(w, r)
		httpError(w, http.StatusForbidden, nil, "this session was created with another credential: send the Authorization header it was initialized with")
		return nil
	}
	// Any request, ungated ones too (ping): a session whose token was
	// revoked, or whose delegation ended, holds no slot and no upstream.
	if r.Method != http.MethodDelete {
		if err := s.live(sess); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			refuseUnread(w, r)
			httpError(w, http.StatusUnauthorized, nil, "the session was closed: its token no longer authorizes calls: "+err.Error())
			return nil
		}
	}
	return sess
}

// sessionlessLimit is the body limit of a request that names no session,
// from its headers: the server's for a token that verifies,
// UnauthenticatedBodyBytes (anonymous) for none. It refuses, unread, a
// request without a token when one is required, or with one that does not
// verify: zero means the request was answered.
func (s *Server) sessionlessLimit(w http.ResponseWriter, r *http.Request) (limit int64, anonymous bool, cred string) {
	_, tok, err := credential(r)
	switch {
	case err != nil:
		refuseUnread(w, r)
		httpError(w, http.StatusUnauthorized, nil, err.Error())
		return 0, false, ""
	case tok == "" && s.opts.RequireToken:
		// No token: none in Authorization, or a signature there (AVP-Sig)
		// that names none.
		w.Header().Set("WWW-Authenticate", "Bearer")
		refuseUnread(w, r)
		httpError(w, http.StatusUnauthorized, nil, "give your token in an Authorization: Bearer header to start a session")
		return 0, false, ""
	case tok == "" || s.opts.CheckToken == nil:
		return min(s.opts.MaxBodyBytes, UnauthenticatedBodyBytes), true, ""
	}
	if err := s.opts.CheckToken(tok); err != nil {
		s.log.Warn("session refused: its token does not verify", zap.Error(err))
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		refuseUnread(w, r)
		httpError(w, http.StatusUnauthorized, nil, "the token in the Authorization header is not valid: "+err.Error())
		return 0, false, ""
	}
	return s.opts.MaxBodyBytes, false, s.tokenBodyCred(tok)
}

// authorize verifies an AVP-Sig in Authorization (see
// Options.AuthorizeVerifiesSignatures) and runs Options.Authorize; false
// means the request was answered.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, body []byte, sess *session) bool {
	if !s.opts.AuthorizeVerifiesSignatures {
		if err := s.verifyAVPSig(r, body); err != nil {
			s.log.Warn("request refused: its AVP-Sig signature does not verify", zap.Error(err))
			w.Header().Set("WWW-Authenticate", avpsig.Scheme)
			httpError(w, http.StatusUnauthorized, nil, "the Authorization header's AVP-Sig signature does not verify: "+err.Error())
			return false
		}
	}
	if s.opts.Authorize == nil {
		return true
	}
	var info *Session
	if sess != nil {
		info = &sess.Session
	}
	err := s.opts.Authorize(r, body, info)
	if err == nil {
		return true
	}
	status := http.StatusForbidden
	var sc interface{ StatusCode() int }
	if errors.As(err, &sc) {
		status = sc.StatusCode()
	}
	httpError(w, status, nil, err.Error())
	return false
}

// asciiEqualFold is strings.EqualFold for ASCII letters only, as media
// types compare: no other character folds to one of them.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// isJSONMediaType reports whether a Content-Type is application/json
// (with parameters, say).
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

func (s *Server) servePost(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !asciiEqualFold(ct, "application/json") && !isJSONMediaType(ct) {
		httpError(w, http.StatusUnsupportedMediaType, nil, "the body must be application/json")
		return
	}
	if !accepts(r.Header.Values("Accept"), "application/json") || !accepts(r.Header.Values("Accept"), "text/event-stream") {
		httpError(w, http.StatusNotAcceptable, nil, "the Accept header must list both application/json and text/event-stream")
		return
	}
	// Who sends it is known from its headers: its session, or its token,
	// is checked before a byte of its body is read, and the body limit
	// follows from it.
	var sess *session
	limit, anonymous, cred := s.opts.MaxBodyBytes, false, ""
	if r.Header.Get(HeaderSessionID) != "" {
		if sess = s.session(w, r); sess == nil {
			return
		}
	} else if limit, anonymous, cred = s.sessionlessLimit(w, r); limit == 0 {
		return
	}
	if sess != nil {
		cred = sess.bodyCred()
	}
	body, release, err := s.readBody(w, r, limit, anonymous, cred)
	if err != nil {
		return
	}
	defer release()
	// One message on one line: the relay reads newline-delimited frames,
	// and insignificant whitespace (newlines included) is not the message.
	// (Room for the newline feed adds.)
	var frame bytes.Buffer
	frame.Grow(len(body) + 1)
	if err := json.Compact(&frame, body); err != nil {
		writeJSON(w, http.StatusBadRequest, proxy.ErrorFrame(nil, proxy.CodeParseError, "parse error: the body is not JSON"))
		return
	}
	if frame.Len() > 0 && frame.Bytes()[0] == '[' {
		httpError(w, http.StatusBadRequest, nil, "invalid request: JSON-RPC batches are not accepted; send one message per request")
		return
	}
	m, err := proxy.ReadClientMessage(frame.Bytes())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, proxy.RefusalFrame(err))
		return
	}
	if sess == nil {
		initialize := m.Kind == proxy.KindRequest && m.Method == "initialize"
		stateless := !initialize && statelessStyle(r, m)
		if !initialize && !stateless {
			httpError(w, http.StatusBadRequest, m.ID, "missing "+HeaderSessionID+" header: send initialize first")
			return
		}
		if !s.authorize(w, r, body, nil) {
			return
		}
		auth, tok, err := credential(r)
		if err != nil {
			httpError(w, http.StatusUnauthorized, m.ID, err.Error())
			return
		}
		// Its token, or that it needs one, sessionlessLimit checked.
		if sess, err = s.newSession(auth, tok, stateless, stateless && fromLDPFront(r.Context())); err != nil {
			status := http.StatusServiceUnavailable
			if errors.Is(err, errCredentialSessions) || errors.Is(err, errTreeSessions) {
				status = http.StatusTooManyRequests // this client's, not the server's
			}
			w.Header().Set("Retry-After", "1")
			httpError(w, status, m.ID, err.Error())
			return
		}
		if initialize {
			w.Header().Set(HeaderSessionID, sess.ID)
		}
	} else if !s.authorize(w, r, body, sess) {
		return
	}
	if sess.shared && m.Method == gate.MethodDelegate {
		// It binds a token to the relay's session (as a request or a
		// notification), for the calls that bring none: on a shared
		// relay, other clients' calls.
		httpError(w, http.StatusBadRequest, m.ID, m.Method+" binds a token to a session: initialize one to delegate")
		return
	}
	if m.Kind != proxy.KindRequest {
		if sess.shared && (m.Kind == proxy.KindResponse || m.Method == "notifications/cancelled") {
			// The relay is shared by clients that present one credential:
			// which of them a request or a server request belongs to, it
			// cannot tell. A stateless request is cancelled by closing
			// its stream, and gets no server requests to answer.
			httpError(w, http.StatusBadRequest, nil, "a stateless client cancels a request by closing its stream, and answers no server requests: this message needs a session (initialize)")
			return
		}
		// A notification, or the client's answer to the upstream's request:
		// the relay takes it from here.
		err := sess.feed(frame.Bytes())
		release()
		if err != nil {
			httpError(w, http.StatusNotFound, nil, "the session has ended: start a new one with initialize")
			return
		}
		if m.Method == "notifications/cancelled" {
			// Only what the relay cancels: a request it goes on with
			// keeps its slot.
			if id, ok := proxy.CancelledRequestID(frame.Bytes()); ok {
				sess.cancelled(id)
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	if draining {
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, m.ID, errDraining.Error())
		return
	}
	st, err := sess.begin(m.ID, frame.Bytes())
	switch {
	case errors.Is(err, errEnded):
		httpError(w, http.StatusNotFound, m.ID, "the session has ended: start a new one with initialize")
		return
	case errors.Is(err, errDuplicate), errors.Is(err, errProgressInUse):
		httpError(w, http.StatusConflict, m.ID, err.Error())
		return
	case err != nil:
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusTooManyRequests, m.ID, err.Error())
		return
	}
	if err := sess.feed(frame.Bytes()); err != nil {
		sess.abandon(st, "the session's relay is not accepting input")
	}
	// The inbox holds its copy: the body is no longer this request's.
	release()
	ok := s.writeStream(w, r, st, true)
	if m.Method == "initialize" && !ok && !sess.shared {
		sess.close("initialize failed")
	}
}

// writeStream writes a stream's events to an HTTP response until its final
// event, the session's end, or the client's going away. A POST's stream
// whose only event is its response is written as one application/json
// body. It reports whether the final event was a result.
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, st *stream, post bool) bool {
	sess := st.sess
	sess.mu.Lock()
	st.writer++
	gen := st.writer
	st.attached = true
	if st.taken != nil {
		close(st.taken) // the response writing it so far returns
	}
	st.taken = make(chan struct{})
	taken := st.taken
	sess.mu.Unlock()
	defer func() {
		sess.mu.Lock()
		if st.writer == gen {
			st.attached = false
		}
		sess.seen = time.Now()
		sess.mu.Unlock()
	}()
	rc := http.NewResponseController(w)
	sse := false
	var evs []event
	var out []byte // what one pass writes
	var flushTimer *time.Timer
	var flushC <-chan time.Time // the unflushed priming event's deadline
	for {
		sess.mu.Lock()
		if st.writer != gen {
			sess.mu.Unlock()
			// Another response resumed this stream: it gets the wake-up
			// this one may have taken.
			st.signal()
			return false
		}
		evs = append(evs[:0], st.unsent()...)
		final, ended := st.final, sess.ended
		sess.mu.Unlock()
		if post && !sse && final && len(evs) == 1 && s.opts.JSONResponses {
			_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			writeJSON(w, http.StatusOK, evs[0].data)
			sess.mu.Lock()
			st.sent = evs[0].seq + 1
			sess.mu.Unlock()
			sess.delivered(st)
			return isResult(evs[0].data)
		}
		if len(evs) > 0 || (!sse && !(post && s.opts.JSONResponses)) {
			// A client that stops reading holds only its own stream, and
			// not for ever.
			_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if !sse {
				h := w.Header()
				h.Set("Content-Type", "text/event-stream")
				h.Set("Cache-Control", "no-cache")
				h.Set("X-Accel-Buffering", "no")
				w.WriteHeader(http.StatusOK)
				sse = true
				// A priming event: the client has an id to resume from
				// before the first message, and a reconnection delay.
				out = append(appendEventID(append(out, "id: "...), st.id, st.sentLocked(sess)-1), "\nretry: 1000\ndata: \n\n"...)
			}
			for _, ev := range evs {
				out = append(appendEventID(append(out, "id: "...), st.id, ev.seq), "\nevent: message\ndata: "...)
				out = append(append(out, ev.data...), "\n\n"...)
			}
			_, err := w.Write(out)
			out = out[:0]
			if err != nil {
				return false
			}
			if final && len(evs) > 0 {
				// The last write: returning sends it and the stream's end
				// together.
			} else if len(evs) == 0 && post {
				// Only the headers and the priming event so far: the
				// answer usually follows within microseconds, and then
				// goes out in the same write.
				if flushTimer == nil {
					flushTimer = primingTimers.Get().(*time.Timer)
					flushTimer.Reset(primingDelay)
					defer func() {
						flushTimer.Stop() // no stale tick after Stop (Go 1.23 timers)
						primingTimers.Put(flushTimer)
					}()
				} else {
					flushTimer.Reset(primingDelay)
				}
				flushC = flushTimer.C
			} else if err := rc.Flush(); err != nil {
				return false
			} else {
				flushC = nil
			}
			if len(evs) > 0 {
				sess.mu.Lock()
				if st.writer == gen {
					st.sent = evs[len(evs)-1].seq + 1
					st.trim()
				}
				sess.mu.Unlock()
			}
			if final && len(evs) > 0 {
				sess.delivered(st)
				return isResult(evs[len(evs)-1].data)
			}
			if !final {
				continue
			}
		}
		if final {
			// Cancelled: no response comes.
			sess.delivered(st)
			return false
		}
		if ended && !final {
			if !sse {
				httpError(w, http.StatusNotFound, nil, "the session has ended: "+sess.endMsg)
			}
			return false
		}
		select {
		case <-st.wake:
		case <-taken:
			return false
		case <-flushC:
			flushC = nil
			if err := rc.Flush(); err != nil {
				return false
			}
		case <-r.Context().Done():
			if post && sess.shared {
				// MCP 2026-07-28: a request's stream ending is its
				// cancellation; the relay settles it and tells the
				// upstream.
				sess.cancel(st)
			}
			return false
		case <-sess.done:
			// Final answers were added before done closed; one more pass
			// writes them.
		}
	}
}

// writeTimeout bounds one write to a client.
const writeTimeout = 30 * time.Second

// primingDelay is how long a POST's stream headers and priming event may
// wait for the first message before they are sent on their own. Sent on
// their own they cost a write, and the client a read, more per request:
// the delay is long enough for an answer that queues behind other
// sessions' calls on a busy server, short next to a tool's own time.
const primingDelay = 20 * time.Millisecond

// primingTimers are stopped timers for writeStream's priming delay.
var primingTimers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// sentLocked reads st.sent under the session's lock.
func (st *stream) sentLocked(sess *session) int64 {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return st.sent
}

// isResult reports whether a stream's final event, a response (the relay's,
// which route read, or the front's own error), carries a result.
func isResult(frame []byte) bool {
	return !bytes.Contains(frame, []byte(`"error":{`))
}

func (s *Server) serveGet(w http.ResponseWriter, r *http.Request) {
	if !accepts(r.Header.Values("Accept"), "text/event-stream") {
		httpError(w, http.StatusNotAcceptable, nil, "the Accept header must list text/event-stream")
		return
	}
	sess := s.session(w, r)
	if sess == nil || !s.discardBody(w, r, sess) || !s.authorize(w, r, nil, sess) {
		return
	}
	st := sess.streams0()
	if last := r.Header.Get(headerLastEventID); last != "" {
		sid, seq, ok := parseEventID(last)
		sess.mu.Lock()
		var found *stream
		if ok {
			found = sess.streams[sid]
		}
		if found != nil {
			// Resume after the event the client last saw (events no
			// longer kept cannot be sent again).
			found.sent = min(max(seq+1, found.base), found.base+int64(len(found.events)))
		}
		sess.mu.Unlock()
		if found == nil {
			httpError(w, http.StatusNotFound, nil, "no stream of this session has event "+last+" (it was delivered, or never existed)")
			return
		}
		st = found
	}
	s.writeStream(w, r, st, false)
}

// streams0 is the standalone stream.
func (s *session) streams0() *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[0]
}

func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request) {
	sess := s.session(w, r)
	if sess == nil || !s.discardBody(w, r, sess) || !s.authorize(w, r, nil, sess) {
		return
	}
	sess.close("the client ended the session (DELETE)")
	select {
	case <-sess.done:
	case <-r.Context().Done():
	}
	w.WriteHeader(http.StatusNoContent)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
