package avpsig

import "time"

const (
	// DefaultWindow is how far a request's timestamp may lie behind the
	// verifier's clock when Verifier.Window is zero (ahead of it, no more
	// than DefaultMaxAhead).
	DefaultWindow = 60 * time.Second
	// DefaultMaxNonces bounds the nonces a Verifier holds when
	// Verifier.MaxNonces is zero: about 8 MB.
	DefaultMaxNonces = 100_000
	// DefaultMaxNoncesPerTree bounds the nonces a Verifier (or a
	// RedisNonces) holds for one delegation tree when its bound is zero:
	// with the default window, about 80 requests a second from the
	// holders of one root token, whatever keys they sign with. Ten trees
	// at the bound fill DefaultMaxNonces; one fills a tenth.
	DefaultMaxNoncesPerTree = 10_000
	// DefaultMaxAhead is how far a signature's timestamp may lie ahead of
	// the verifier's clock when Verifier.MaxAhead is zero: a timestamp
	// from the future would keep its nonce held (Nonce.Expires) for
	// longer than the window, so a flood of them holds more nonces for
	// longer. Five seconds allow for clocks that differ.
	DefaultMaxAhead = 5 * time.Second
	// MaxHeaderLen bounds the Authorization and AVP-Sig-Covered values
	// parsed. A did:key is 56 characters and the rest of the header about
	// 200; a covered query is bounded by the request line.
	MaxHeaderLen = 8 << 10
	// nonceLen is the length of a nonce: 16 random bytes in hex.
	nonceLen = 32
	// maxTSLen bounds the decimal digits of ts (Unix seconds until 33658).
	maxTSLen = 12
)
