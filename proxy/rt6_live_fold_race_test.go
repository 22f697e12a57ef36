//go:build unix && redteam

package proxy_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// RT6: two proxies of one machine starting at once, and a dead live
// record. Machine 1's proxy is killed (kill -9) within the second of its
// last 10 calls: they are only in its live record. Redis loses the same
// writes (back to the snapshot at 10). Two proxies start at once on the
// machine: B takes the dead record's flock to fold it, and C, starting
// while B holds it, takes the record for a running proxy's (deadLive:
// "its proxy runs") and skips it; C had read the counts file before B
// wrote the fold into it, and never reads it again (storeSeen merges the
// file into what it writes, not into what it checks). C's calls see the
// machine's count at 10 and forward 20 more: 40 on 30.
//
// To place B's fold deterministically, the test holds the counts file's
// lock (a second that has not passed, as the killed-counts test does):
// B, a real proxy, blocks in its start with the dead record's flock held,
// which is what any fold looks like for the milliseconds it takes. B's
// start then completes and folds the record; C has spent meanwhile.
//
// Fix: take one machine-wide lock (the counts file's, or a fold lock of
// the identity) around join's read of the counts file, deadLive and the
// fold, so that a starting proxy waits for another's fold and then reads
// the folded counts file; a running proxy's record is then the only one
// found locked.
func TestRedTeamRT6ConcurrentStartSkipsDeadRecord(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", func(int) bool { return true }) // killed below
	n, _, _ := drain(t, s1, 10)
	f.settled()
	seenFile := f.seenFiles()[0]
	kept := func() int64 {
		b, _ := os.ReadFile(seenFile)
		var st struct {
			MSeen map[string]int64 `json:"mseen"`
		}
		json.Unmarshal(b, &st)
		var top int64
		for _, v := range st.MSeen {
			top = max(top, v)
		}
		return top
	}
	mcptest.Eventually(t, "machine 1's counts kept", func() bool { return kept() == n })
	lock, err := os.OpenFile(seenFile+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	pid := p1.UpstreamPID()
	if err := p1.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	p1.WaitExit(mcptest.WaitTimeout)
	records, _ := filepath.Glob(strings.TrimSuffix(seenFile, ".seen.json") + ".live.*")
	if len(records) != 1 {
		t.Fatalf("want the killed proxy's live record, found %v", records)
	}
	f.restore(snap)
	// B starts and folds the dead record: its flock taken.
	pb := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, WantExit: func(int) bool { return true }})
	mcptest.Eventually(t, "proxy B to hold the dead record's lock (folding it)", func() bool {
		fd, err := os.OpenFile(records[0], os.O_RDWR, 0)
		if err != nil {
			return false
		}
		defer fd.Close()
		return errors.Is(syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
	})
	// C starts at the same moment.
	pc, sc := f.start(f.a, "", nil)
	more, typ, detail := drain(t, sc, 40)
	f.sameAsUpstreams([]*mcptest.Process{pc}, more)
	lock.Close() // B's fold completes
	stopProxy(t, pc)
	pb.Stdin.Close()
	pb.WaitExit(mcptest.WaitTimeout)
	total := n + m + more
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls, was killed within a second of the last %d, Redis lost them (back to %d); of two proxies started at once, the one that did not fold the dead record forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n+m, m, n, more, total, typ, detail)
	}
}
