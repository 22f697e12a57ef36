package ldp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// HMACInput returns the bytes the reference SDKs MAC (src/signing.rs,
// sdk/python/src/ldp_protocol/signing.py):
//
//	from|to|session_id|timestamp|message_id[|nonce]|<key fields>|<TYPE>
//
// where the key fields are HELLO's delegate_id, SESSION_ACCEPT's
// session_id, SESSION_REJECT's reason, TASK_SUBMIT's task_id|skill, the
// task_id of the other task messages, and nothing for the rest. The task's
// input and output, the payload mode, provenance and the delegateos member
// are not covered.
func HMACInput(e *Envelope) []byte {
	b := make([]byte, 0, 256)
	for _, f := range []string{e.From, e.To, e.SessionID, e.Timestamp, e.MessageID} {
		b = append(b, f...)
		b = append(b, '|')
	}
	b = b[:len(b)-1]
	if e.Nonce != "" {
		b = append(b, '|')
		b = append(b, e.Nonce...)
	}
	b = append(b, '|')
	switch body := e.Body.(type) {
	case *Hello:
		b = append(b, body.DelegateID...)
	case *SessionAccept:
		b = append(b, body.SessionID...)
	case *SessionReject:
		b = append(b, body.Reason...)
	case *TaskSubmit:
		b = append(b, body.TaskID...)
		b = append(b, '|')
		b = append(b, body.Skill...)
	default:
		b = append(b, TaskID(e.Body)...)
	}
	b = append(b, '|')
	return append(b, e.Body.Type()...)
}

// HMACSignature is the reference's hmac-sha256 signature of e under secret:
// lower-case hex.
func HMACSignature(e *Envelope, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(HMACInput(e))
	return hex.EncodeToString(m.Sum(nil))
}

// SignHMAC sets e's signature and signature_algorithm as the reference's
// apply_signature does (the algorithm is not signed). It clears signer.
func SignHMAC(e *Envelope, secret string) {
	e.Signer = ""
	e.raw = nil
	e.Signature = HMACSignature(e, secret)
	e.SignatureAlgorithm = AlgHMACSHA256
}

// verifyHMAC checks e's hex signature in constant time. A signature that
// is not 64 lower-case hex digits is malformed: the reference compares hex
// strings, so any other spelling never verifies there either.
func verifyHMAC(e *Envelope, secret string) error {
	got, err := hex.DecodeString(e.Signature)
	if err != nil || len(got) != sha256.Size || hex.EncodeToString(got) != e.Signature {
		return malformed("hmac-sha256 signature is not 64 lower-case hex digits")
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(HMACInput(e))
	if !hmac.Equal(m.Sum(nil), got) {
		return refuse(ReasonTampered, "hmac-sha256 signature does not verify (a signed field changed, or another secret signed it)")
	}
	return nil
}
