package budget

const (
	// MaxLevels bounds the levels of one reservation: a token has at most
	// 17 blocks (dct.MaxAttenuations + 1), and a level per block is the most
	// a caller needs.
	MaxLevels = 64
	// MaxKeyLen bounds a level's key in bytes: room for an issuer and 17
	// delegation IDs of dct.MaxStringLen each.
	MaxKeyLen = 8 << 10

	// maxLineLen bounds one line of the spend log: every key escaped at six
	// bytes a byte (control characters), a limit of 19 digits and a comma
	// per key, plus the other members.
	maxLineLen = MaxLevels*(6*MaxKeyLen+3+20) + 160
	// maxAt bounds the time of a call in the log (Unix milliseconds): the
	// end of the year 9999, the last a timestamp can write.
	maxAt = 253402300799999
	// compactLines is how many lines File appends before it rewrites the
	// log as one total per key. It compacts later when there are more keys
	// than that, so that the rewrite costs O(1) amortized per append.
	compactLines = 4096
)
