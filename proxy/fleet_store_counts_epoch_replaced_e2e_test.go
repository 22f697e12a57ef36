//go:build linux

package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// waitEpochMapped waits until proxy p maps the counts epoch that path
// names now (its /proc/PID/maps lists the file's inode): a running proxy
// checks every 250 ms, off the calls' path, that the epoch it maps is
// still the state directory's, and maps the new one when it is not.
func waitEpochMapped(t *testing.T, p *mcptest.Process, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ino := strconv.FormatUint(fi.Sys().(*syscall.Stat_t).Ino, 10)
	mcptest.Eventually(t, "the running proxy to map the state directory's counts epoch "+path, func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p.Cmd.Process.Pid))
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 6 && f[4] == ino && strings.Contains(l, "counts-epoch") {
				return true
			}
		}
		return false
	})
}

// The counts epoch replaced while a proxy runs (red team 7, RT7-2). Every
// proxy of a machine maps the state directory's counts-epoch and reads it
// at each reservation, to learn when the machine's other proxies wrote
// the counts file. It used to keep the inode it mapped at its start for
// good: the file removed (or replaced by a rename: an rsync or backup
// restore of the directory, an `rm` of what looks like a stray counter)
// is made anew by the next proxy started there, and from then on the two
// counted their writes in different files: the running proxy never
// learned what the new one saw (40 calls on 30, nothing logged). A
// running proxy now checks every 250 ms that the file it maps is still
// the path's (and before each write of its counts), and maps the new one,
// reading the counts file again. Scenario as
// TestE2EFaultRunningPeerLearnsTheMachinesCounts: proxy 2 makes 1 call;
// counts-epoch is removed; proxy 1 starts (makes a new one), makes 9
// calls, Redis is snapshot, 10 more, proxy 1 stops; Redis goes back to
// the snapshot (10). Proxy 2 refuses store_reset.
func TestE2EFaultCountsEpochReplacedWhileRunning(t *testing.T) {
	f := newStoreFleet(t)
	p2, s2 := f.start(f.a, "", nil)
	if n, typ, detail := drain(t, s2, 1); n != 1 {
		t.Fatalf("proxy 2's call: %s: %s", typ, detail)
	}
	epoch := filepath.Join(f.e.Dir, "state", "counts-epoch")
	if err := os.Remove(epoch); err != nil {
		t.Fatal(err)
	}
	p1, s1 := f.start(f.a, "", nil)
	waitEpochMapped(t, p2, epoch)
	n, _, _ := drain(t, s1, 9)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	f.restore(snap)
	more, typ, detail := drain(t, s2, 40)
	total := 1 + n + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("counts-epoch removed while proxy 2 ran; machine 1's proxies made %d calls, Redis went back to %d: proxy 2 forwarded %d more (%d on 30), then %s: %s; want none, store_reset", 1+n+m, 1+n, more, total, typ, detail)
	}
}

// The state directory moved while a proxy runs (red team 7, RT7-2b):
// DELEGATEOS_STATE_DIR is a symbolic link, pointed at a copy of the
// directory while proxy 2 runs (docs/fleet.md: a running proxy whose
// directory was moved takes over). Proxy 2 kept the old directory's
// counts-epoch mapped (and wrote its counts through the link into the
// new one); proxy 1, started afterwards, mapped the new directory's: 40
// calls on 30, as in TestE2EFaultCountsEpochReplacedWhileRunning. Proxy
// 2 now maps the new directory's epoch within 250 ms and reads the counts
// file again.
func TestE2EFaultCountsEpochOfAMovedStateDir(t *testing.T) {
	f := newStoreFleet(t)
	base := t.TempDir()
	a, b, link := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "st")
	if err := os.Mkdir(a, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	start := func() (*mcptest.Process, *mcptest.Session) {
		p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: []string{"DELEGATEOS_STATE_DIR=" + link}})
		return p, p.Connect(mcptest.SessionOptions{})
	}
	p2, s2 := start()
	if n, typ, detail := drain(t, s2, 1); n != 1 {
		t.Fatalf("proxy 2's call: %s: %s", typ, detail)
	}
	f.settled()
	mcptest.Eventually(t, "proxy 2's counts written", func() bool {
		m, _ := filepath.Glob(filepath.Join(a, "*.seen.json"))
		return len(m) == 1
	})
	copyStateDir(t, a, b)
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b, link); err != nil {
		t.Fatal(err)
	}
	p1, s1 := start()
	waitEpochMapped(t, p2, filepath.Join(b, "counts-epoch"))
	n, _, _ := drain(t, s1, 9)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	f.restore(snap)
	more, typ, detail := drain(t, s2, 40)
	total := 1 + n + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("the state directory moved (its link re-pointed at a copy) while proxy 2 ran; machine 1's proxies made %d calls, Redis went back to %d: proxy 2 forwarded %d more (%d on 30), then %s: %s; want none, store_reset", 1+n+m, 1+n, more, total, typ, detail)
	}
}
