package dct

import "time"

// Decoding limits. A token over any of them is malformed_token; the limits
// bound the work an unauthenticated input can cause before any signature
// has been checked.
const (
	// MaxTokenLen bounds the serialized (base64url) token.
	MaxTokenLen = 64 << 10
	// MaxAttenuations bounds the number of attenuation blocks.
	MaxAttenuations = 16
	// MaxCapabilities bounds the capabilities of one block.
	MaxCapabilities = 64
	// MaxStringLen bounds every string field (IDs, namespaces, actions).
	MaxStringLen = 256
	// MaxResourceLen bounds a capability's resource pattern.
	MaxResourceLen = 1024
	// MaxResourceSegments bounds the '/'-separated segments of a resource
	// pattern, which bounds glob subset analysis.
	MaxResourceSegments = 64
	// MaxWrapperLen bounds the JSON {token, format} wrapper.
	MaxWrapperLen = MaxTokenLen + 1024
)

// Verification defaults.
const (
	// DefaultClockSkew is how far in the future issuedAt may lie.
	DefaultClockSkew = 30 * time.Second
	// DefaultCacheSize is the number of verified tokens a Verifier keeps.
	DefaultCacheSize = 1024
	// DefaultTTL is the token lifetime when none is given (§3.6).
	DefaultTTL = time.Hour
)
