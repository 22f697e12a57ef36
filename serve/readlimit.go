package serve

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// boundReads gives every request ReadTimeout to send its body, whatever
// handler serves it: net/http reads what a handler left of a body before
// it answers, and without a deadline a client that declares a body and
// stalls in it holds its connection for ever. A handler that streams its
// answer lifts the deadline once it has read the body (readBody).
func (s *Server) boundReads(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.ReadTimeout))
		h.ServeHTTP(w, r)
	})
}

// budgetWait is how long a request waits for its share of
// MaxBodyBytesInFlight before it is refused 503.
const budgetWait = time.Second

// UnauthenticatedBodyBytes bounds the body of a request that brings no
// credential the server checked (no session, no token that verifies):
// an initialize, or a small stateless request, fits.
const UnauthenticatedBodyBytes = 64 << 10

// chunkStep is the share a body of no declared length takes before its
// first byte; it takes more (doubling) as it is read.
const chunkStep = 64 << 10

// readBody reads a request's body, at most limit bytes, within
// ReadTimeout, then lifts the read deadline: the connection is the
// answer's from then on. Before it reads a byte it takes the body's share
// of MaxBodyBytesInFlight (the declared length; a body of no declared
// length takes chunkStep, and more as it is read), waiting briefly; a body
// declared over limit, or one that gets no share, is refused unread.
// anonymous is for a request with no credential: it takes its share at
// once or is refused. cred names the credential of any other request:
// the bodies of one credential (delegation tree) hold at most a quarter of
// MaxBodyBytesInFlight (a larger one is refused at once, 503), so that one
// token holder cannot starve the others with bodies it never sends. The
// caller calls release once it no longer holds the body (it may call it
// again). It answers the request itself when it returns an error.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64, anonymous bool, cred string) (body []byte, release func(), err error) {
	release = func() {}
	hint := anonymousHint(limit, anonymous, s.opts.MaxBodyBytes)
	if !anonymous && limit > s.bodies.credCap {
		limit = s.bodies.credCap
		hint = " (a quarter of the bytes of bodies in flight, one credential's share)"
	}
	if r.ContentLength > limit {
		refuseUnread(w, r)
		httpError(w, http.StatusRequestEntityTooLarge, nil, "the body exceeds the limit of "+itoa(limit)+" bytes"+hint)
		return nil, release, errBodyTooLarge
	}
	if r.ContentLength == 0 {
		return nil, release, nil
	}
	grab := func(n int64) bool {
		if anonymous {
			return s.bodies.takeAnonymous(n)
		}
		return s.bodies.take(r.Context(), n, budgetWait, cred)
	}
	refuse := func() {
		refuseUnread(w, r)
		s.warnBudget(anonymous)
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, nil, "the server holds as many request bodies as it may (max body bytes in flight, a quarter of it per credential): try again")
	}
	share := min(limit, chunkStep)
	if r.ContentLength > 0 {
		share = r.ContentLength
	}
	if !grab(share) {
		refuse()
		return nil, release, errNoBudget
	}
	held := true
	release = func() {
		if held {
			held = false
			s.bodies.give(share, anonymous, cred)
		}
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.ReadTimeout))
	if r.ContentLength > 0 {
		// Its length is known: one buffer of it, not a doubling one.
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		// Charged as it is read: a client that stalls holds what it sent.
		var buf bytes.Buffer
		mr := http.MaxBytesReader(w, r.Body, limit)
		for {
			if share == limit {
				_, err = buf.ReadFrom(mr)
				break
			}
			_, err = buf.ReadFrom(io.LimitReader(mr, share-int64(buf.Len())))
			if err != nil || int64(buf.Len()) < share {
				break // read whole, or failed
			}
			more := min(share, limit-share)
			if !grab(more) {
				release()
				refuse()
				return nil, release, errNoBudget
			}
			share += more
		}
		body = buf.Bytes()
	}
	if err != nil {
		release()
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, nil, "the body exceeds the limit of "+itoa(limit)+" bytes"+hint)
			return nil, release, err
		}
		httpError(w, http.StatusBadRequest, nil, "reading the body failed: "+err.Error())
		return nil, release, err
	}
	_ = rc.SetReadDeadline(time.Time{})
	return body, release, nil
}

// discardBody reads the body a GET or DELETE has no use for (at most
// UnauthenticatedBodyBytes, its session checked first) so that the request
// is whole; false means the request was answered.
func (s *Server) discardBody(w http.ResponseWriter, r *http.Request, sess *session) bool {
	_, release, err := s.readBody(w, r, min(UnauthenticatedBodyBytes, s.opts.MaxBodyBytes), false, sess.bodyCred())
	release()
	return err == nil
}

// warnBudget logs that requests are refused for want of room for their
// bodies, at most once a second: a flood must not become one of log lines.
func (s *Server) warnBudget(anonymous bool) {
	now := time.Now().UnixNano()
	last := s.budgetWarned.Load()
	if now-last < int64(time.Second) || !s.budgetWarned.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("requests refused (503): the bytes of bodies in flight are at their bound (max body bytes in flight)",
		zap.Bool("without_credential", anonymous), zap.Int64("in_use", s.bodies.inUse()), zap.Int64("bound", s.opts.MaxBodyBytesInFlight))
}

var (
	errBodyTooLarge = errors.New("the body is over the limit")
	errNoBudget     = errors.New("no room for the body")
)

// anonymousHint says why an anonymous request's limit is lower.
func anonymousHint(limit int64, anonymous bool, max int64) string {
	if !anonymous || limit >= max {
		return ""
	}
	return " for a request without a session or a token that verifies (start a session, or send your token in an Authorization: Bearer header, to send up to " + itoa(max) + ")"
}

// bodyCred names the credential a session's requests' bodies are charged
// to (byteBudget.credCap): its client's token's delegation tree (which
// attenuating the token does not multiply), its canonical token, or the
// hash of the credential it was started with.
func (sess *session) bodyCred() string {
	if sess.tree != "" {
		return "tree " + sess.tree
	}
	if sess.credKey != "" {
		return "token " + sess.credKey
	}
	return string(sess.cred[:])
}

// tokenBodyCred is bodyCred for a request with no session and token tok.
func (s *Server) tokenBodyCred(tok string) string {
	if s.opts.SessionTree != nil {
		if tree := s.opts.SessionTree(tok); tree != "" {
			return "tree " + tree
		}
	}
	return "token " + s.credentialKey(tok)
}
