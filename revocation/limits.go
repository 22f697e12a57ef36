package revocation

import "time"

const (
	// MaxListSize bounds the bytes ParseList, Load and File read. An entry
	// is about 300 bytes, so this leaves room for hundreds of thousands.
	MaxListSize = 64 << 20
	// maxRevokedAtLen bounds revokedAt before it is parsed.
	maxRevokedAtLen = 64
	// racyWindow is how long after a list file changes a further change
	// may carry the same change time, so that File compares its content
	// instead: the kernel stamps files from a clock that advances one tick
	// at a time (at most 10 ms) and lags the time File reads by up to a
	// tick.
	racyWindow = 20 * time.Millisecond
	// coarseRacyWindow is racyWindow on a file system that keeps whole
	// seconds (two on FAT).
	coarseRacyWindow = 2*time.Second + racyWindow
)
