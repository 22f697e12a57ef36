package budget

import (
	"testing"

	"github.com/delegateos/delegateos/internal/redistest"
)

// BenchmarkReserveCommitStateDir is one proxy's serial Reserve and Commit
// on Redis (appendfsync everysec) with a state directory, as a proxy
// runs: the reservation script's per-proxy, per-machine and instance
// fields (p:, m:, i:) and the live record are in each call's cost.
func BenchmarkReserveCommitStateDir(b *testing.B) {
	s := openRedisIn(b, redistest.StartFsync(b, "everysec").URL(), b.TempDir())
	runFleet(b, []Store{s}, [][]Level{benchLevels}, 1)
}
