package chain

import "github.com/delegateos/delegateos/dct"

const (
	// MaxLineLen bounds one line of a File's log. The longest line is an
	// insert: a token of up to dct.MaxTokenLen bytes, a contract ID of up to
	// dct.MaxStringLen bytes escaped at six bytes a byte, and fixed-size
	// fields.
	MaxLineLen = dct.MaxTokenLen + 6*dct.MaxStringLen + 2048
	// MaxLogSize bounds a File's log, which is read whole into memory; an
	// insert that would pass it is refused.
	MaxLogSize = 256 << 20
)

// idHexLen is the number of lowercase hex digits after "del_" or "att_".
const idHexLen = 12
