//go:build !race

package mcptest

// RaceEnabled reports whether the tests run with the race detector.
const RaceEnabled = false
