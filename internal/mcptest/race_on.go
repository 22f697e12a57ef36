//go:build race

package mcptest

// RaceEnabled reports whether the tests run with the race detector. The
// delegateos binary is then built with it too, so that a race in the proxy
// fails the test that provoked it.
const RaceEnabled = true
