package verify

import "time"

// Decoding limits. They bound the work that untrusted bytes (a spec read
// from a contract, an agent's output, a judge's reply) can cause.
const (
	// MaxSpecLen bounds the bytes ParseSpec reads.
	MaxSpecLen = 1 << 20
	// MaxSpecDepth bounds the nesting of composite specs: a spec at the top
	// is at depth 1, its steps at depth 2.
	MaxSpecDepth = 8
	// MaxSpecNodes bounds the specs in one tree, composites included.
	MaxSpecNodes = 256
	// MaxSteps bounds the steps of one composite.
	MaxSteps = 64
	// MaxOutputLen bounds the agent output Verify reads.
	MaxOutputLen = 8 << 20
	// MaxNumberLen bounds the characters of one JSON number in an output,
	// in check params and in schemas.
	MaxNumberLen = 128
	// MaxExponent bounds the written exponent of a JSON number (1e400 is
	// refused before a schema validator turns it into a huge big.Rat).
	MaxExponent = 400
	// MaxCheckNameLen bounds a check function's name.
	MaxCheckNameLen = 128
	// MaxPatternLen bounds a regex_match pattern and a schema pattern, in
	// bytes.
	MaxPatternLen = 4096
	// MaxPathLen bounds a dot path in bytes.
	MaxPathLen = 1024
	// MaxPathSegments bounds the segments of a dot path.
	MaxPathSegments = 64
	// MaxFields bounds field_exists' list of paths.
	MaxFields = 256
	// MaxEvaluations bounds llm_judge's evaluations.
	MaxEvaluations = 15
	// MaxJudgePromptLen bounds the judgePrompt rubric in bytes.
	MaxJudgePromptLen = 16 << 10
	// MaxJudgeModelLen bounds judgeModel in bytes.
	MaxJudgeModelLen = 256
	// MaxJudgeTemperature is the highest judgeTemperature accepted.
	MaxJudgeTemperature = 2.0
	// MaxJudgeReplyLen bounds a judge's reply (CommandJudge's stdout).
	MaxJudgeReplyLen = 64 << 10
	// MaxReviewTimeout bounds a human_review spec's timeoutMs.
	MaxReviewTimeout = 30 * 24 * time.Hour
	// MaxDetailsLen bounds CheckResult.Details as Verify returns it; longer
	// details are cut at a UTF-8 boundary and marked with "…".
	MaxDetailsLen = 4096
)

// Defaults from DelegateOS §6.4–§6.6.
const (
	// DefaultPassThreshold is a weighted composite's threshold when the spec
	// gives none.
	DefaultPassThreshold = 0.7
	// WeightTolerance is how far the weights of a weighted composite may sum
	// from 1.0.
	WeightTolerance = 0.001
	// DefaultJudgeModel is llm_judge's model when judgeModel is absent.
	DefaultJudgeModel = "claude-sonnet-4-20250514"
	// DefaultEvaluations is llm_judge's number of judge calls when
	// evaluations is absent.
	DefaultEvaluations = 3
	// SpreadWarning is the max−min spread of judge scores above which
	// Verifier.Warn is called.
	SpreadWarning = 0.3
	// DefaultReviewTimeout is how long human_review waits for the reviewer
	// before it escalates to llm_judge.
	DefaultReviewTimeout = 24 * time.Hour
	// DefaultJudgeTimeout bounds one run of a CommandJudge's command.
	DefaultJudgeTimeout = 2 * time.Minute
)
