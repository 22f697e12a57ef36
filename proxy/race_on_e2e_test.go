//go:build race

package proxy_test

// raceEnabled builds the delegateos binary under test with the race
// detector when the tests themselves run with it.
const raceEnabled = true
