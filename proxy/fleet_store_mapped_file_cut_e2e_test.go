//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// The counts epoch cut while a proxy runs (red team 7, RT7-1). Every
// proxy of the machine maps the state directory's counts-epoch and loads
// it at each reservation. A file cut to nothing while mapped (the user's
// `: > counts-epoch`, a restore tool rewriting the file in place) made
// that load touch a page past the file's end: SIGBUS, the proxy died at
// its next call, unanswered. Loads and stores through a mapping now run
// with panic-on-fault set: the proxy puts a whole counter in its place,
// maps it, reads the counts file again and answers the call; a proxy
// started afterwards starts.
func TestE2EFaultCountsEpochCutWhileMapped(t *testing.T) {
	f := newStoreFleet(t)
	p, s := f.start(f.a, "", func(int) bool { return true })
	if n, typ, detail := drain(t, s, 1); n != 1 {
		t.Fatalf("the first call: %s: %s", typ, detail)
	}
	epoch := filepath.Join(f.e.Dir, "state", "counts-epoch")
	if err := os.Truncate(epoch, 0); err != nil {
		t.Fatal(err)
	}
	n, typ, detail := drain(t, s, 1)
	if p.WaitExit(time.Second) {
		t.Fatalf("the proxy exited (status %d) at the call after counts-epoch was cut to 0 bytes (call: %d forwarded, %s: %s): %s", p.ExitCode(), n, typ, detail, crashLine(p))
	}
	if n != 1 {
		t.Errorf("the call after counts-epoch was cut: %s: %s; want it forwarded", typ, detail)
	}
	if fi, err := os.Stat(epoch); err != nil || fi.Size() < 8 {
		t.Errorf("counts-epoch after the call: %v, %v; want a whole counter again", fi, err)
	}
	p2, s2 := f.start(f.a, "", nil)
	if n, typ, detail := drain(t, s2, 1); n != 1 {
		t.Errorf("a proxy started after the cut: %s: %s; want the call forwarded", typ, detail)
	}
	stopProxy(t, p2)
	stopProxy(t, p)
}

// crashLine is the SIGBUS line of a proxy's stderr, if any.
func crashLine(p *mcptest.Process) string {
	e := p.Stderr.String()
	i := strings.Index(e, "SIGBUS")
	if i < 0 {
		return "no SIGBUS logged"
	}
	return e[max(i-40, 0):min(i+80, len(e))]
}

// A proxy's own live record spoiled while it is mapped (red team 7,
// RT7-4, and what its attacker would try next): cut to nothing (the next
// raise stored past the file's end: SIGBUS, the call unanswered, its
// reservation held), renamed away (a proxy starting after a kill -9
// finds records by their names: the raises in it were lost), or replaced
// by an older copy (a restore: the starting proxy folded the copy, not
// the raises). The record holds the raises of the last second, which a
// kill -9 would otherwise lose when Redis loses the same writes
// (TestE2EFaultKillWithinTheSecondMasksRollback): a proxy whose record
// faults at a raise, or is found within 250 ms not to be whole or not at
// its name (off the calls' path), takes a new one holding every count it
// saw. Scenario: machine 1 makes 10 calls (kept in its counts file), the
// test holds the counts file's lock (the second not passed yet), Redis is
// snapshot, the record is spoiled, machine 1 makes 10 more and is killed
// (kill -9) once it has a new record; Redis goes back to the snapshot;
// machine 2 makes 10 calls; machine 1's restarted proxy refuses
// store_reset. (As killedWithinTheSecond, with the record spoiled after
// the snapshot and the kill only once the proxy has a new record.)
func TestE2EFaultLiveRecordSpoiledWhileMapped(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(rec, older string) error
	}{
		{"cut", func(rec, _ string) error { return os.Truncate(rec, 0) }},
		{"renamed away", func(rec, _ string) error { return os.Rename(rec, filepath.Join(filepath.Dir(rec), "moved-aside")) }},
		{"replaced by an older copy", func(rec, older string) error { return os.Rename(older, rec) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newStoreFleet(t)
			p1, s1 := f.start(f.a, "", func(int) bool { return true }) // killed below
			n, _, _ := drain(t, s1, 10)
			f.settled()
			mcptest.Eventually(t, "machine 1's counts kept", func() bool {
				b, _ := os.ReadFile(f.seenFiles()[0])
				return containsMSeen(b, n)
			})
			recs, err := filepath.Glob(filepath.Join(f.e.Dir, "state", "*.live.*"))
			if err != nil || len(recs) != 1 {
				t.Fatalf("want one live record, got %v (%v)", recs, err)
			}
			rec := recs[0]
			older := filepath.Join(f.e.Dir, "state", "older-copy")
			b, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(older, b, 0o600); err != nil {
				t.Fatal(err)
			}
			lock, err := os.OpenFile(f.seenFiles()[0]+".lock", os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			snap := f.snapshot()
			if err := c.spoil(rec, older); err != nil {
				t.Fatal(err)
			}
			m, typ, detail := drain(t, s1, 10)
			if p1.WaitExit(time.Second) {
				t.Fatalf("the proxy exited (status %d) at the calls after its live record was %s (%d forwarded, then %s: %s): %s", p1.ExitCode(), c.name, m, typ, detail, crashLine(p1))
			}
			if m != 10 {
				t.Fatalf("the calls after the live record was %s: %d forwarded, then %s: %s; want 10", c.name, m, typ, detail)
			}
			f.settled()
			mcptest.Eventually(t, "machine 1's proxy to take a new live record", func() bool {
				recs, _ := filepath.Glob(filepath.Join(f.e.Dir, "state", "*.live.*"))
				for _, r := range recs {
					if r != rec {
						return true
					}
				}
				return false
			})
			pid := p1.UpstreamPID()
			if err := p1.Cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
			p1.WaitExit(mcptest.WaitTimeout)
			lock.Close()
			f.restore(snap)
			p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
			k, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
			p3, s3 := f.start(f.a, "", nil)
			more, typ, detail := drain(t, s3, 40)
			f.sameAsUpstreams([]*mcptest.Process{p2, p3}, k+more)
			if more != 0 || typ != string(gate.StoreReset) {
				t.Errorf("machine 1's live record %s while mapped, %d calls after it, kill -9, Redis back to %d, machine 2 made %d: machine 1's restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset", c.name, m, n, k, more, n+m+k+more, typ, detail)
			}
		})
	}
}
