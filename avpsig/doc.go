// Package avpsig signs and verifies HTTP requests with AVP-Sig v2, the
// request signature of the Agent Veil Protocol (AVP 0.1, "Authentication"),
// so that a delegation token is held by a key and not only carried as a
// bearer secret.
//
// # The signature
//
// A client holding an Ed25519 key signs the UTF-8 text
//
//	v2:{METHOD}:{PATH}:{canonical query}:{ts}:{nonce}:{hex SHA-256 of the body}
//
// where ts is the time in Unix seconds and nonce 32 random hex characters,
// and sends it in the Authorization header:
//
//	Authorization: AVP-Sig v="2",did="did:key:z6Mk…",ts="…",nonce="…",sig="…"
//
// with sig the 64-byte signature in hex. delegateos sends the same value in
// the AVP-Signature header instead (SignatureHeader), leaving Authorization
// to a bearer token; a Verifier reads either, and a request must carry
// exactly one signature. The canonical query (CanonicalQuery)
// decodes the query's pairs, keeps repeated keys and blank values, sorts the
// pairs by key and then value, and percent-encodes every byte but the
// unreserved characters A–Z a–z 0–9 - . _ ~, so a space is %20 and / is
// %2F; "?b=hello+world&a=2&a=1&empty=" becomes
// "a=1&a=2&b=hello%20world&empty=". AVP-Sig v1, which does not cover the
// query, is refused.
//
// Sign makes the signature; it also makes AVP-Sig-Covered, which repeats the
// canonical query and the body hash the client signed. That header is never
// trusted: a Verifier reads it only after the signature failed, and only to
// tell a changed body from a changed query (the signature must verify over
// what it claims). Requests signed by other AVP clients, without it, are
// refused the same way with the reason bad_signature.
//
// # Verification
//
// Verifier.Verify accepts a request only if its signature was made by the
// key of the DID the caller expects (for a delegation token, the current
// delegatee), its timestamp lies within Window before now (MaxAhead
// after), the signature covers this method, path, query and body, and its
// nonce has not been accepted before within the window. Each failure is an *Error with its own Reason:
// missing, malformed, wrong_key, stale, bad_signature, body_tampered,
// query_tampered, replayed, busy, store_unavailable. A nonce is spent only
// once the signature verifies, until its timestamp leaves the window.
//
// # Nonce stores
//
// A Verifier spends nonces in its Store, a NonceStore. Without one it uses
// its own memory (MemoryNonces): at most MaxNonces are held, and
// MaxNoncesPerTree for one delegation tree (VerifyInTree: for a token, its
// root block, which its holders cannot multiply as they can keys), and
// when that many are live a new request is refused (busy) rather than
// forgetting one early. A timestamp more than MaxAhead ahead of the clock
// is refused as stale, so no nonce is held for longer than the window. RedisNonces keeps them in Redis, so that the verifiers of several
// processes sharing it accept each nonce once between them: one script
// (SET NX PX, on Redis's clock) per spend, and a request is refused (store_unavailable) when Redis does
// not answer. RedisNonces.Join records the fleet's window, so that each
// nonce is remembered for as long as any verifier sharing the store takes
// its signature.
package avpsig
