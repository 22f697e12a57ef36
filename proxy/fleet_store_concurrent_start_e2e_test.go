//go:build linux

package proxy_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Two proxies of one machine starting at once, and a dead live record
// (red team 6, RT6-1). Machine 1's proxy is killed (kill -9) within the
// second of its last 10 calls: they are only in its live record. Redis
// loses the same writes (back to the snapshot at 10). Two proxies start
// at once on the machine: B takes the dead record's flock to fold it,
// and C, starting while B folds, must not take the record for a running
// proxy's and skip it with the counts file read before B's fold: C waits
// on the machine's fold lock of the store's identity, which B holds from
// its read of the counts file to the end of its fold, then reads the
// folded counts and refuses store_reset.
//
// To place B's fold deterministically, the test holds the counts file's
// lock (a second that has not passed, as the killed-counts test does):
// B, a real proxy, blocks in its start with the dead record's flock (and
// the fold lock) held, which is what any fold looks like for the
// milliseconds it takes. C is then seen waiting on the fold lock
// (/proc/locks) before the counts lock is let go.
func TestE2EFaultConcurrentStartWaitsForTheFold(t *testing.T) {
	f := newStoreFleet(t)
	n, m, snap, lock := f.killedWithinTheSecond(func() (*mcptest.Process, *mcptest.Session) {
		return f.start(f.a, "", func(int) bool { return true }) // killed
	}, func() string { return f.seenFiles()[0] })
	defer lock.Close()
	seenFile := f.seenFiles()[0]
	record := f.deadRecord(seenFile)
	f.restore(snap)
	// B starts and folds the dead record: its flock taken.
	pb := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, WantExit: func(int) bool { return true }})
	mcptest.Eventually(t, "proxy B to hold the dead record's lock (folding it)", func() bool { return recordLocked(record) })
	// C starts at the same moment: it waits for B's fold.
	pc := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a})
	fold := strings.TrimSuffix(seenFile, ".seen.json") + ".fold.lock"
	mcptest.Eventually(t, "proxy C to wait on the machine's fold lock", func() bool { return waitsOnLock(pc.Cmd.Process.Pid, fold) })
	lock.Close() // B's fold completes
	sc := pc.Connect(mcptest.SessionOptions{})
	more, typ, detail := drain(t, sc, 40)
	f.sameAsUpstreams([]*mcptest.Process{pc}, more)
	stopProxy(t, pc)
	pb.Stdin.Close()
	pb.WaitExit(mcptest.WaitTimeout)
	total := n + m + more
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls, was killed within a second of the last %d, Redis lost them (back to %d); of two proxies started at once, the one that did not fold the dead record forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n+m, m, n, more, total, typ, detail)
	}
}

// waitsOnLock reports whether process pid waits for a flock of the file
// at path (a blocked request in /proc/locks: "N: -> FLOCK ... PID
// MAJ:MIN:INODE ...").
func waitsOnLock(pid int, path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 7 || f[1] != "->" || f[2] != "FLOCK" || f[5] != strconv.Itoa(pid) {
			continue
		}
		if strings.HasSuffix(f[6], ":"+strconv.FormatUint(ino, 10)) {
			return true
		}
	}
	return false
}
