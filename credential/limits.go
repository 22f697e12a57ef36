package credential

import "time"

// Limits on untrusted credentials.
const (
	// MaxSize bounds a secured document, in bytes.
	MaxSize = 256 << 10
	// MaxDepth bounds the nesting of arrays and objects.
	MaxDepth = 32
	// maxProofValueLen bounds proofValue: a 64-byte signature is at most
	// 88 base58 characters after the 'z'.
	maxProofValueLen = 100
	// maxTimeLen bounds a dateTimeStamp before it is parsed.
	maxTimeLen = 64
	// maxStringShown bounds how much of an untrusted string an error quotes.
	maxStringShown = 80
)

// DefaultClockSkew is how early, before validFrom, a credential is accepted
// when VerifyOptions.ClockSkew is zero: AVP's 60 seconds.
const DefaultClockSkew = 60 * time.Second
