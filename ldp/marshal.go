package ldp

import (
	"encoding/json"
	"fmt"
)

// MarshalJSON writes the envelope as the reference does (provenance null
// when absent), with the optional members only when set.
func (e *Envelope) MarshalJSON() ([]byte, error) {
	if e.Body == nil {
		return nil, fmt.Errorf("ldp: envelope has no body")
	}
	body, err := MarshalBody(e.Body)
	if err != nil {
		return nil, err
	}
	w := wireEnvelope{
		MessageID:   e.MessageID,
		SessionID:   e.SessionID,
		From:        e.From,
		To:          e.To,
		Body:        body,
		PayloadMode: e.PayloadMode,
		Timestamp:   e.Timestamp,
		Provenance:  e.Provenance,
		DelegateOS:  e.DelegateOS,
	}
	w.Signature = optional(e.Signature)
	w.SignatureAlgorithm = optional(e.SignatureAlgorithm)
	w.Signer = optional(e.Signer)
	w.Nonce = optional(e.Nonce)
	return json.Marshal(w)
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MarshalBody writes a body with its type member first.
func MarshalBody(b Body) ([]byte, error) {
	fields, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	t, _ := json.Marshal(b.Type())
	out := append([]byte(`{"type":`), t...)
	if len(fields) > 2 {
		out = append(out, ',')
	}
	return append(out, fields[1:]...), nil
}

// Raw returns the envelope's bytes as received, nil for an envelope built
// locally.
func (e *Envelope) Raw() []byte { return e.raw }

// Check validates a locally built envelope as ParseEnvelope validates a
// received one.
func (e *Envelope) Check() error {
	if e.Body == nil {
		return malformed("body is missing")
	}
	if err := e.Body.check(); err != nil {
		return malformed("body: %s: %v", e.Body.Type(), err)
	}
	if err := e.check(); err != nil {
		return malformed("%v", err)
	}
	return nil
}
