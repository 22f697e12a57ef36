package revocation

import "time"

const (
	// MaxListSize bounds the bytes ParseList, Load and File read. An entry
	// is about 300 bytes, so this leaves room for hundreds of thousands.
	MaxListSize = 64 << 20
	// maxRevokedAtLen bounds revokedAt before it is parsed.
	maxRevokedAtLen = 64
	// DefaultCheckInterval is how often File.Revoked looks at the file when
	// FileOptions.CheckInterval is zero.
	DefaultCheckInterval = 100 * time.Millisecond
)
