package revocation

import (
	"path/filepath"
	"testing"
)

// BenchListFile writes a list file of n entries (at most 100,001), none
// naming a block of another test's token, and opens it settled (see
// openSettled), for the benchmarks of package revocation_test.
func BenchListFile(b *testing.B, n int) *File {
	path := filepath.Join(b.TempDir(), "list.json")
	benchFile(b, path, benchmarkEntries(b, n))
	return openSettled(b, path)
}
