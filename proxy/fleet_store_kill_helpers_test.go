//go:build unix

package proxy_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// killedWithinTheSecond is how every kill-within-the-second test
// (RT5-3) begins: machine 1's proxy, started by start (which must accept
// any exit), makes n calls, which its counts file (seenFile's) keeps;
// the test then holds that file's lock, which is what a second that has
// not passed yet looks like to the proxy, takes a snapshot of the store,
// has the proxy make m more calls and kills it (kill -9), its upstream
// gone with it: the last m calls are in its live record only. The caller
// restores the snapshot when Redis is to lose them, and lets the lock go
// (lock.Close) when the proxies that start next may write the counts.
func (f *fleet) killedWithinTheSecond(start func() (*mcptest.Process, *mcptest.Session), seenFile func() string) (n, m int64, snap storeSnapshot, lock *os.File) {
	t := f.t
	t.Helper()
	p1, s1 := start()
	n, _, _ = drain(t, s1, 10)
	f.settled()
	mcptest.Eventually(t, "machine 1's counts kept", func() bool {
		b, _ := os.ReadFile(seenFile())
		return containsMSeen(b, n)
	})
	lock, err := os.OpenFile(seenFile()+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		t.Fatal(err)
	}
	snap = f.snapshot()
	m, _, _ = drain(t, s1, 10)
	f.settled()
	pid := p1.UpstreamPID()
	if err := p1.Cmd.Process.Kill(); err != nil {
		lock.Close()
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	p1.WaitExit(mcptest.WaitTimeout)
	return n, m, snap, lock
}

// deadRecord returns the killed proxy's live record, beside the counts
// file seenFile, failing the test unless it is the only one.
func (f *fleet) deadRecord(seenFile string) string {
	f.t.Helper()
	records, _ := filepath.Glob(strings.TrimSuffix(seenFile, ".seen.json") + ".live.*")
	if len(records) != 1 {
		f.t.Fatalf("want the killed proxy's live record, found %v", records)
	}
	return records[0]
}

// recordLocked reports whether a process holds the flock of the live
// record at path (a running proxy's, or one folding it).
func recordLocked(path string) bool {
	fd, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer fd.Close()
	return errors.Is(syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
}

// containsMSeen reports whether the counts file b records the machine's
// count n at some key.
func containsMSeen(b []byte, n int64) bool {
	var st struct {
		MSeen map[string]int64 `json:"mseen"`
	}
	if json.Unmarshal(b, &st) != nil {
		return false
	}
	for _, v := range st.MSeen {
		if v == n {
			return true
		}
	}
	return false
}
