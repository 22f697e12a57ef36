package main

// Limits keep one tool call from exhausting memory or flooding the client.
const (
	// maxReadBytes bounds read_file; larger files are refused.
	maxReadBytes = 64 << 20
	// maxBigBytes bounds the big diagnostic tool's result.
	maxBigBytes = 64 << 20
	// maxSearchMatches bounds the lines search returns.
	maxSearchMatches = 100
	// maxSearchFileBytes skips larger files during search.
	maxSearchFileBytes = 1 << 20
	// maxSearchLineRunes truncates each matching line in search results.
	maxSearchLineRunes = 200
	// maxSlowSteps and maxSlowDelayMs bound the slow diagnostic tool.
	maxSlowSteps   = 10000
	maxSlowDelayMs = 60000
	// maxProbePaths and maxProbeBytes bound the probe diagnostic tool.
	maxProbePaths = 16
	maxProbeBytes = 64 << 10

	// stdioWorkers is how many tool calls run at once. mcp-go's default of
	// five would serialise the proxy's parallel-call tests behind slow calls.
	stdioWorkers = 64
	// stdioQueue is deep because when mcp-go's queue is full it handles the
	// call on its read loop, which then cannot see cancellations or the
	// client's answers to sampling requests.
	stdioQueue = 10000
)
