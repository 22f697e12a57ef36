//go:build race

package examples

// raceEnabled builds the delegateos binary under test with the race
// detector when the tests run with it, so that a race in the proxy shows
// up in the session that provoked it.
const raceEnabled = true
