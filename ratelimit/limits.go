package ratelimit

import "time"

const (
	// MaxN bounds a Limit's N: a key's log holds up to N times.
	MaxN = 1_000_000
	// MaxPer bounds a Limit's window.
	MaxPer = 24 * time.Hour
	// MaxKeys bounds the keys of one Reserve: a limit for the policy and
	// one for a rule, at each of 17 levels, for each URI of a
	// subscription; beyond that a call is refused rather than slow.
	MaxKeys = 256
	// MaxNameLen and MaxLevelLen bound a key's limit name and level in
	// bytes.
	MaxNameLen  = 2 << 10
	MaxLevelLen = 8 << 10

	// maxLineTimes bounds the times of one line: a rewrite writes a key's
	// log in lines of at most this many.
	maxLineTimes = 4096
	// maxLineLen bounds one line of the file: every key escaped at six
	// bytes a byte, and the times.
	maxLineLen = MaxKeys*(6*(MaxNameLen+MaxLevelLen)+8) + 21*maxLineTimes + 128
	// compactLines is how many lines a file takes before it is rewritten
	// with what its logs hold. It is rewritten later when there are more
	// keys than that, so the rewrite costs O(1) amortized per line.
	compactLines = 4096
	// minSweep is the number of keys below which idle keys are not looked
	// for.
	minSweep = 1024
)
