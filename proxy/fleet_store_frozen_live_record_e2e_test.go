//go:build linux

package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team 9 (rtstore9): a proxy's live record renamed away while the
// proxy is frozen (SIGSTOP: a paused container), then the proxy makes 10
// calls and is killed (kill -9) within the second, before its counts
// write (the test holds the counts lock), and Redis goes back 10 calls.
// The raises of those calls must be in a record the next proxy finds.
// Held, and held also with RT9-2's check before a reservation disabled
// (3 of 3 runs): the watcher's tick due during the stop runs at SIGCONT,
// ahead of the calls; the check before a reservation made when the
// watcher has not run for 500 ms makes that an order, not a race.
func TestE2EFaultLiveRecordRenamedAwayWhileFrozen(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", func(int) bool { return true }) // killed
	n, _, _ := drain(t, s1, 10)
	f.settled()
	var seenFile string
	mcptest.Eventually(t, "machine 1's counts kept", func() bool {
		m, _ := filepath.Glob(filepath.Join(f.e.Dir, "state", "*.seen.json"))
		if len(m) != 1 {
			return false
		}
		seenFile = m[0]
		b, _ := os.ReadFile(m[0])
		return containsMSeen(b, n)
	})
	lock, err := os.OpenFile(seenFile+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	snap := f.snapshot()
	record := f.deadRecord(seenFile) // the only one: proxy 1's (running)
	if err := p1.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p1.Cmd.Process.Signal(syscall.SIGCONT) })
	mcptest.Eventually(t, "proxy 1 stopped", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p1.Cmd.Process.Pid))
		_, rest, _ := strings.Cut(string(b), ") ")
		return strings.HasPrefix(rest, "T")
	})
	stopped := time.Now()
	if err := os.Rename(record, filepath.Join(t.TempDir(), "away")); err != nil {
		t.Fatal(err)
	}
	// Frozen longer than two watcher periods: a lower bound, not a race.
	<-time.After(time.Until(stopped.Add(600 * time.Millisecond)))
	p1.Cmd.Process.Signal(syscall.SIGCONT)
	m, _, _ := drain(t, s1, 10)
	f.settled()
	pid := p1.UpstreamPID()
	if err := p1.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	p1.WaitExit(mcptest.WaitTimeout)
	lock.Close()
	f.restore(snap)
	p3, s3 := f.start(f.a, "", nil)
	more, typ, detail := drain(t, s3, 40)
	f.sameAsUpstreams([]*mcptest.Process{p3}, more)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("proxy 1's live record renamed away while it was frozen, then %d calls and kill -9; Redis back to %d: the next proxy forwarded %d (%d on 30), then %s: %s; want none, store_reset", m, n, more, n+m+more, typ, detail)
	}
}
