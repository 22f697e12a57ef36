package ldp

import "fmt"

// Reason says why an envelope was refused.
type Reason string

// The reasons of an *Error. Each is also the code of the TASK_FAILED or
// SESSION_REJECT error a delegate answers with.
const (
	// ReasonMalformed: the bytes are not an envelope this package reads.
	ReasonMalformed Reason = "envelope_malformed"
	// ReasonUnsigned: no signature, where one is required.
	ReasonUnsigned Reason = "envelope_unsigned"
	// ReasonAlgorithm: a signature algorithm the verifier does not take.
	ReasonAlgorithm Reason = "signature_algorithm_refused"
	// ReasonWrongKey: signed by a key other than the one required.
	ReasonWrongKey Reason = "signature_wrong_key"
	// ReasonTampered: the signature does not verify over the envelope (a
	// signed member changed, or, for HMAC, another secret signed it).
	ReasonTampered Reason = "signature_invalid"
	// ReasonStale: the timestamp lies outside the window.
	ReasonStale Reason = "envelope_stale"
	// ReasonReplayed: the message_id or nonce was accepted before.
	ReasonReplayed Reason = "envelope_replayed"
	// ReasonBusy: the replay store is full of live entries.
	ReasonBusy Reason = "replay_store_busy"
)

// Error is a refused envelope.
type Error struct {
	Reason Reason
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return string(e.Reason)
	}
	return string(e.Reason) + ": " + e.Detail
}

// Is makes errors.Is(err, ErrStale) and the like true for every *Error of
// that reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Detail == "" && t.Reason == e.Reason
}

// Sentinels for errors.Is.
var (
	ErrMalformed = &Error{Reason: ReasonMalformed}
	ErrUnsigned  = &Error{Reason: ReasonUnsigned}
	ErrAlgorithm = &Error{Reason: ReasonAlgorithm}
	ErrWrongKey  = &Error{Reason: ReasonWrongKey}
	ErrTampered  = &Error{Reason: ReasonTampered}
	ErrStale     = &Error{Reason: ReasonStale}
	ErrReplayed  = &Error{Reason: ReasonReplayed}
	ErrBusy      = &Error{Reason: ReasonBusy}
)

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

func malformed(format string, args ...any) *Error {
	return refuse(ReasonMalformed, format, args...)
}
