package serve

import "net/http"

// ReadBody reads the body of a request to a front the server mounts
// beside MCP (the LDP delegate's envelopes) within the server's budget of
// bodies in flight (MaxBodyBytesInFlight), as a body without a credential
// the server checked: at most limit bytes, its declared length taken from
// the budget's anonymous share before a byte is read, refused 413 or 503
// unread when it does not fit. It answers the request itself when it
// returns an error; release gives the body's share back (the caller calls
// it once it no longer holds the body).
func (s *Server) ReadBody(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, release func(), err error) {
	return s.readBody(w, r, limit, true, "")
}
