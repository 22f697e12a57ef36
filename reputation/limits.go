package reputation

// Decoding limits. Workspace files are untrusted input: another tool, a
// person or a git merge may have written them. A file over any limit is
// refused before or while it is parsed.
const (
	// MaxFileSize bounds the bytes read from one workspace file. A signal
	// takes about 300 bytes of YAML, so a profile holds some 50,000
	// signals. Signals are never deleted, so a profile that reaches the
	// limit takes no more signals (the error says so).
	MaxFileSize = 16 << 20
	// MaxDepth bounds the nesting of front-matter collections.
	MaxDepth = 32
	// MaxSlugLen bounds a slug (a file name without ".md").
	MaxSlugLen = 128
	// MaxNameLen bounds a dimension, domain or criterion name.
	MaxNameLen = 64
	// MaxIDLen bounds identifiers: DIDs, evidence references, delegation
	// and task contract IDs.
	MaxIDLen = 512
	// MaxTextLen bounds free text: names, messages, task descriptions,
	// scope items.
	MaxTextLen = 8 << 10
	// MaxCriteria bounds the evaluation criteria of one contract.
	MaxCriteria = 32
	// MaxDomainSignals bounds the domain-competence signals one evaluation
	// generates (one per artifact tag).
	MaxDomainSignals = 8
	// MaxSignalsPerRecord bounds the signals one Record call appends.
	MaxSignalsPerRecord = 64
)
