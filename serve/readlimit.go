package serve

import (
	"errors"
	"io"
	"net/http"
	"time"
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

// readBody reads a request's body (at most MaxBodyBytes) within
// ReadTimeout, then lifts the read deadline: the connection is the
// answer's from then on. It answers the request itself when it returns
// nil and an error.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.ReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, nil, "the body exceeds the limit of "+itoa(s.opts.MaxBodyBytes)+" bytes")
			return nil, err
		}
		httpError(w, http.StatusBadRequest, nil, "reading the body failed: "+err.Error())
		return nil, err
	}
	_ = rc.SetReadDeadline(time.Time{})
	return body, nil
}
