package avpsig

import "time"

const (
	// DefaultWindow is how far a request's timestamp may lie from the
	// verifier's clock, either way, when Verifier.Window is zero.
	DefaultWindow = 60 * time.Second
	// DefaultMaxNonces bounds the nonces a Verifier holds when
	// Verifier.MaxNonces is zero: about 8 MB.
	DefaultMaxNonces = 100_000
	// DefaultMaxNoncesPerSigner bounds the nonces a Verifier holds for
	// one signer when Verifier.MaxNoncesPerSigner is zero: with the
	// default window, about 160 requests a second from one key.
	DefaultMaxNoncesPerSigner = 10_000
	// MaxHeaderLen bounds the Authorization and AVP-Sig-Covered values
	// parsed. A did:key is 56 characters and the rest of the header about
	// 200; a covered query is bounded by the request line.
	MaxHeaderLen = 8 << 10
	// nonceLen is the length of a nonce: 16 random bytes in hex.
	nonceLen = 32
	// maxTSLen bounds the decimal digits of ts (Unix seconds until 33658).
	maxTSLen = 12
)
