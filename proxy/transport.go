package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// The relay's client side is a stream of newline-delimited frames (Run's
// clientIn and clientOut). A transport other than stdio, such as the
// Streamable HTTP front of package serve, feeds each client message into
// that stream as one line and routes each line the relay writes back to
// the right place: it needs to read a message's kind and id as the relay
// does, so that what it routes by is what the relay answers by. It makes
// no decision of its own; every request is decided by the relay's gate.

// MessageKind is what a JSON-RPC message is.
type MessageKind int

// The kinds of JSON-RPC message.
const (
	KindInvalid      MessageKind = iota
	KindRequest                  // method and id
	KindNotification             // method, no id
	KindResponse                 // result or error, and id
)

// Message is what a transport routes a message by.
type Message struct {
	Kind MessageKind
	// Method is a request's or notification's method.
	Method string
	// ID is the raw JSON of the id as written (nil without one). The relay
	// answers a request with its id exactly as the client wrote it.
	ID []byte
}

// ErrUnreadable is a client message the relay would not read as one
// request, notification or response; the transport answers it with
// RefusalFrame and does not pass it on.
var ErrUnreadable = errors.New("not a JSON-RPC message the relay can read unambiguously")

// ReadClientMessage reads one client frame (one JSON value on one line) as
// the relay's client pump will. When the relay would refuse the frame
// before any other processing (unsafe line characters, a malformed or
// ambiguous message, an unusable request id), the error says why and
// RefusalFrame(frame, err) is the relay's answer to it.
func ReadClientMessage(frame []byte) (Message, error) {
	safe, reason := lineSafe(frame)
	if reason != "" {
		return Message{}, refusal{code: codeParseError, msg: "parse error: " + reason, id: clone(unsafeFrameID(frame))}
	}
	frame = safe
	h, err := scanClientHeader(frame)
	if err != nil {
		code, msg := unreadable(frame)
		var id []byte
		if code == codeInvalidRequest {
			if errors.Is(err, errAmbiguous) {
				msg = "invalid request: " + err.Error()
			}
			if len(h.id) > 0 && string(h.id) != "null" {
				id = clone(h.id)
			}
		}
		return Message{}, refusal{code: code, msg: msg, id: id}
	}
	m := Message{Method: h.method, ID: clone(h.id)}
	switch h.kind {
	case kindRequest:
		m.Kind = KindRequest
		if _, ok := parseRequestID(h.id); !ok {
			return Message{}, refusal{code: codeInvalidRequest, msg: "invalid request id: use a string of at most 256 bytes or an integer within ±2^53"}
		}
	case kindNotification:
		m.Kind = KindNotification
	case kindResponse:
		m.Kind = KindResponse
	default:
		return Message{}, refusal{code: codeInvalidRequest, msg: "invalid request: not a JSON-RPC message"}
	}
	return m, nil
}

// ReadRelayMessage reads a frame the relay wrote to its client, for
// routing: its kind, method and id.
func ReadRelayMessage(frame []byte) (Message, error) {
	h, err := scanHeader(frame)
	if err != nil {
		return Message{}, err
	}
	m := Message{Method: h.method, ID: h.id}
	switch h.kind {
	case kindRequest:
		m.Kind = KindRequest
	case kindNotification:
		m.Kind = KindNotification
	case kindResponse:
		m.Kind = KindResponse
	}
	return m, nil
}

// refusal is the relay's answer to a client frame it cannot read.
type refusal struct {
	code int
	msg  string
	id   []byte
}

func (r refusal) Error() string { return r.msg }

func (r refusal) Unwrap() error { return ErrUnreadable }

// RefusalFrame is the JSON-RPC error response (without a line ending) the
// relay answers a frame with that ReadClientMessage refused with err.
func RefusalFrame(err error) []byte {
	var r refusal
	if !errors.As(err, &r) {
		r = refusal{code: codeInvalidRequest, msg: err.Error()}
	}
	return ErrorFrame(r.id, r.code, r.msg)
}

// ErrorFrame is a JSON-RPC error response with the given id (raw JSON; nil
// is null), code and message, without a line ending.
func ErrorFrame(id []byte, code int, message string) []byte {
	if id == nil {
		id = []byte("null")
	}
	b, err := marshalFrame(rpcError{JSONRPC: "2.0", ID: id, Error: rpcErrorBody{Code: code, Message: message}})
	if err != nil {
		// The id came from a frame the scanner read as JSON; only an id
		// that is not valid JSON gets here.
		b, _ = marshalFrame(rpcError{JSONRPC: "2.0", ID: []byte("null"), Error: rpcErrorBody{Code: code, Message: message}})
	}
	return b
}

// marshalFrame encodes a frame the proxy writes itself. Unlike
// json.Marshal it leaves <, > and & as they are, so that an id is answered
// with the bytes the client sent ("a&b", not "a\u0026b": the same value,
// but not the same bytes to a client that compares them).
func marshalFrame(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// JSON-RPC error codes a transport answers with.
const (
	CodeParseError     = codeParseError
	CodeInvalidRequest = codeInvalidRequest
	CodeInternalError  = codeInternalError
)

// RequestKey is what the relay matches a request id by: two ids with the
// same key are the same request to it (a string by its value, however it
// is escaped; an integer by its value). ok is false for an id the relay
// never takes as a request's.
func RequestKey(raw []byte) (key string, ok bool) {
	k, ok := parseRequestID(raw)
	if !ok {
		return "", false
	}
	if k.isStr {
		return "s" + k.str, true
	}
	return "n" + strconv.FormatInt(k.num, 10), true
}

// CancelledRequestID is the request id a client's notifications/cancelled
// names, read as the relay reads it; ok is false when the relay drops the
// notification without cancelling anything (params it cannot read, a
// member whose name differs only in letter case, no requestId).
func CancelledRequestID(frame []byte) (id []byte, ok bool) {
	h, err := scanClientHeader(frame)
	if err != nil || h.params == nil {
		return nil, false
	}
	cp, err := readCallParams(h.params)
	if err != nil || cp.variant != "" || cp.requestID == nil {
		return nil, false
	}
	return clone(cp.requestID), true
}
