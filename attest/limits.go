package attest

import (
	"time"

	"github.com/delegateos/delegateos/dct"
)

// Decoding limits. An attestation over any of them is malformed.
const (
	// MaxAttestationSize bounds an attestation file (the output included).
	MaxAttestationSize = 4 << 20
	// MaxChildren bounds childAttestations.
	MaxChildren = 64
	// MaxStringLen bounds delegationId and verificationOutcome.method.
	MaxStringLen = dct.MaxStringLen
	// maxTimestampLen bounds createdAt before it is parsed.
	maxTimestampLen = 64
)

// Verification limits and defaults.
const (
	// MaxDepth is how many levels of children below the attestation being
	// verified are followed; a deeper child makes the tree invalid.
	MaxDepth = 8
	// MaxTreeSize bounds the attestations verified for one Verify call.
	MaxTreeSize = 256
	// DefaultClockSkew is how far apart the clocks of an attester, a
	// contract issuer and the verifier may be, when Verifier.ClockSkew is
	// zero.
	DefaultClockSkew = 30 * time.Second
	// ScoreTolerance is how far a claimed verification score may be from
	// the recomputed one.
	ScoreTolerance = 1e-9
)
