package ldp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
)

// The paths of the HTTP binding (§8.1). IdentityPath is where the
// reference SDK's client fetches the card (its delegate serves both).
const (
	MessagesPath = "/ldp/messages"
	StreamPath   = "/ldp/stream"
	IdentityPath = "/ldp/identity"
)

// Handler serves a Responder over HTTP (§8): its identity card at
// WellKnownPath (and IdentityPath), envelopes at MessagesPath (the reply in the response
// body; 202 and no body when there is none), and at StreamPath the same
// with the reply and any TASK_UPDATEs before it as server-sent events.
// A request's bearer token (Authorization: Bearer) is passed to the
// Responder. Bodies over MaxEnvelopeSize (413), not application/json (415)
// or not an envelope (400) are refused with {"error": {code, message}}.
type Handler struct {
	Responder *Responder
	// ReadBody, when not nil, reads a request's body in place of the
	// Handler's own read (at most MaxEnvelopeSize, nothing else bounded),
	// and answers the request itself when it returns an error; release is
	// called once the body is no longer held. A daemon sets it to read
	// within its budget of bodies in flight.
	ReadBody func(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case WellKnownPath, IdentityPath:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			httpError(w, http.StatusMethodNotAllowed, "method_not_allowed", "GET the identity card")
			return
		}
		b, err := json.Marshal(h.Responder.card())
		if err != nil {
			httpError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	case MessagesPath, StreamPath:
		if r.Method != http.MethodPost {
			httpError(w, http.StatusMethodNotAllowed, "method_not_allowed", "POST an LDP envelope")
			return
		}
		h.message(w, r, r.URL.Path == StreamPath)
	default:
		httpError(w, http.StatusNotFound, "not_found", "no such LDP endpoint")
	}
}

func (h *Handler) message(w http.ResponseWriter, r *http.Request, stream bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		httpError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "send the envelope as application/json (§8.2)")
		return
	}
	if h.ReadBody != nil {
		body, release, err := h.ReadBody(w, r)
		if err != nil {
			return
		}
		var once sync.Once
		done := func() { once.Do(release) }
		defer done()
		h.envelope(w, r.WithContext(context.WithValue(r.Context(), releaseBodyKey{}, done)), body, stream)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxEnvelopeSize))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, string(ReasonMalformed), "the envelope is larger than 1 MiB")
			return
		}
		httpError(w, http.StatusBadRequest, string(ReasonMalformed), err.Error())
		return
	}
	h.envelope(w, r, body, stream)
}

// envelope answers the envelope body, read from r.
func (h *Handler) envelope(w http.ResponseWriter, r *http.Request, body []byte, stream bool) {
	bearer := ""
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		bearer = strings.TrimSpace(a[7:])
	}
	var emit func(*Envelope)
	var flusher http.Flusher
	if stream {
		flusher, _ = w.(http.Flusher)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		emit = func(e *Envelope) { writeEvent(w, flusher, e) }
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	ctx := context.WithValue(r.Context(), requestEndpointKey{}, scheme+"://"+r.Host)
	reply, err := h.Responder.Handle(ctx, body, bearer, emit)
	if err != nil {
		if stream {
			w.Header().Set("Content-Type", "application/json")
		}
		httpError(w, http.StatusBadRequest, string(ReasonMalformed), err.Error())
		return
	}
	switch {
	case reply == nil && stream:
		return
	case reply == nil:
		w.WriteHeader(http.StatusAccepted)
	case stream:
		writeEvent(w, flusher, reply)
	default:
		b, err := json.Marshal(reply)
		if err != nil {
			httpError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}
}

// releaseBodyKey carries the release of a request's body (see
// ReleaseBody).
type releaseBodyKey struct{}

// ReleaseBody gives the budget of bodies in flight back the share of the
// request ctx belongs to, before its reply is written: an Executor calls
// it before a task waits for long (for an approver), so that waiting tasks
// do not hold the share every other request is read within. The envelope
// is parsed and verified by then. It does nothing outside a Handler that
// reads with ReadBody, and after its first call.
func ReleaseBody(ctx context.Context) {
	if f, ok := ctx.Value(releaseBodyKey{}).(func()); ok {
		f()
	}
}

// requestEndpointKey carries the URL (scheme and Host) a request reached:
// an envelope may be addressed to it, as the reference's clients address
// their first messages to the URL they were given.
type requestEndpointKey struct{}

func writeEvent(w io.Writer, f http.Flusher, e *Envelope) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	io.WriteString(w, "event: ldp\ndata: ")
	w.Write(b)
	io.WriteString(w, "\n\n")
	if f != nil {
		f.Flush()
	}
}

func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
