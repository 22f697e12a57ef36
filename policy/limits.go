package policy

import (
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/ratelimit"
)

// Limits and defaults. The policy file is written by an operator, but the
// tool names, arguments, URIs and prompt names the Map methods read come
// from MCP clients, so everything they do is bounded by these.
const (
	// MaxFileSize bounds the policy file Load reads.
	MaxFileSize = 1 << 20
	// MaxRules bounds the rules in each of the tool, resource and prompt
	// maps.
	MaxRules = 1000
	// MaxRoots bounds the trusted roots.
	MaxRoots = 1000
	// MaxMatchLen bounds a rule's match pattern.
	MaxMatchLen = 1024
	// MaxToolNameLen bounds the tool names Map and Visible accept.
	MaxToolNameLen = 1024
	// MaxURILen bounds the resource URIs MapResource accepts: the longest
	// resource a token's pattern can name (a longer one could be granted
	// only by "*").
	MaxURILen = dct.MaxResourceLen
	// MaxPromptNameLen bounds the prompt names MapPrompt accepts.
	MaxPromptNameLen = 1024
	// MaxPointerLen bounds a JSON pointer.
	MaxPointerLen = 1024
	// MaxPointerTokens bounds the reference tokens of a JSON pointer.
	MaxPointerTokens = 32
	// MaxCost bounds costs: 2^53-1 microcents, so that JavaScript and Go
	// read the same number.
	MaxCost = 1<<53 - 1
	// MinFrameBytes and MaxFrameBytesLimit bound max_frame_bytes.
	MinFrameBytes      = 1 << 10
	MaxFrameBytesLimit = 1 << 30
	// DefaultMaxFrameBytes is the frame limit when the policy sets none.
	DefaultMaxFrameBytes = 16 << 20
	// maxProblems bounds the problems Parse reports at once.
	maxProblems = 50
)

// Rate limits: a rate's N and its duration (ratelimit bounds what it
// keeps by the same numbers).
const (
	MaxRateCalls = ratelimit.MaxN
	MinRatePer   = time.Millisecond
	MaxRatePer   = ratelimit.MaxPer
)

// Judge and reputation defaults.
const (
	// DefaultJudgeTimeout bounds one run of the judge command when the
	// policy sets no timeout; MaxJudgeTimeout bounds what it may set.
	DefaultJudgeTimeout = 2 * time.Minute
	MaxJudgeTimeout     = time.Hour
	// DefaultCriterionScore is given to the completeness and clarity
	// criteria of a delegation the proxy evaluates, unless the policy says
	// otherwise: the proxy cannot judge them, so it neither rewards nor
	// punishes (RDP's neutral 0.5 would read as "poor" next to the 0.7
	// pass threshold, so the default is that threshold).
	DefaultCriterionScore = 0.7
)
