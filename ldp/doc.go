// Package ldp is the protocol core of LDP 0.1, the LLM Delegate Protocol
// (../shared/specs/ldp-llm-delegate-0.1.md): its message model, envelope
// signatures, identity cards, trust domains, payload modes and sessions.
// It speaks no HTTP and authorises nothing; the daemon puts a Gate behind it.
//
// # Messages
//
// An Envelope carries one Body, one of the twelve message types of §3.2.
// ParseEnvelope reads untrusted bytes strictly: at most MaxEnvelopeSize
// bytes, valid UTF-8, no duplicate member names at any depth, no member the
// message type does not define, identifiers bounded and without control
// characters or '|'. The Python reference SDK writes every member of its
// flat body model, null when unused; such null members of other message
// types are ignored, any other value refused.
//
// # Signatures
//
// Two algorithms (signature_algorithm):
//
//   - "hmac-sha256", the reference's: HMAC-SHA256 under a shared secret,
//     lower-case hex, over from|to|session_id|timestamp|message_id[|nonce]|
//     <body key fields>|<TYPE> exactly as the reference SDKs build it
//     (HMACInput). It does not cover the task's input or output, the payload
//     mode or the provenance, and every holder of the secret can sign as
//     anyone.
//   - "ed25519", this project's profile: the sender's did:key in signer, and
//     in signature the unpadded base64url Ed25519 signature over the RFC 8785
//     (JCS) form of the whole envelope as sent, less its signature member.
//
// A Verifier checks either, then the timestamp against a window, then spends
// the message_id (and nonce) once; each refusal is an *Error whose Reason
// tells unsigned, refused algorithm, malformed, wrong key, tampered, stale,
// replayed and busy apart.
//
// # Identity, trust, modes and sessions
//
// IdentityCard is the §2.1 card (ParseCard validates one read from a peer).
// CheckTrust is §7.2. Negotiate is §4.2 and Session.FallBack §4.3, with
// ValidateInput the §4.4 frame check. Sessions holds the responder's
// sessions through the §5.1 states with the inactivity TTL of §5.4.
package ldp
