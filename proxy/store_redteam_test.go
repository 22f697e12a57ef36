//go:build redteam && linux

package proxy_test

// Red-team tests of issue 19's Redis store history (branch wt-storegen):
// each is a fault the store's checks miss, through the real binaries on a
// real redis-server. They FAIL on the code under test (run them with
// go test -tags redteam -run TestRedTeam ./proxy/); see
// /work/wt/rtstore.report.md for the cause and a fix of each.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/proxy"
)

// RT5. A proxy killed (kill -9) during a stall, after it refused calls
// store_unavailable: Redis runs their reservations when it wakes, and
// nothing ever cancels them (the journal is written only by Close). The
// next proxy on the same machine finds no journal: calls that were
// refused stay charged for ever.
func TestRedTeamStallThenKillLeavesRefusedCallsCharged(t *testing.T) {
	f := newFleet(t, 10*fleetCost, 10*fleetCost, 10*fleetCost)
	f.timeouts = "?read_timeout=300ms&write_timeout=300ms"
	pol := f.policy("")
	pol.RevocationList = ""
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a, WantExit: func(int) bool { return true }})
	s := p.Connect(mcptest.SessionOptions{})
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "a call before the stall")
	f.rtSettled()
	f.srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			f.srv.Resume()
		}
	}()
	for j := range 2 {
		r := s.Call(t, "echo", map[string]any{"text": fmt.Sprint("stalled ", j)})
		if typ, detail := denialData(r); typ != string(proxy.StoreUnavailable) {
			t.Fatalf("a call during the stall: %s: %s, want store_unavailable", typ, detail)
		}
	}
	pid := p.UpstreamPID()
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.WaitExit(mcptest.WaitTimeout)
	if pid > 0 {
		if pr, err := os.FindProcess(pid); err == nil {
			pr.Kill()
		}
		mcptest.Eventually(t, "the killed proxy's upstream gone", func() bool { return mcptest.ProcessGone(pid) })
	}
	f.srv.Resume()
	resumed = true
	// Redis reads what the killed proxy wrote before its connection
	// closed: at least one stalled reservation runs.
	mcptest.Eventually(t, "a stalled reservation to run", func() bool { return f.usage()[f.key(1)].Reserved > 0 })
	_, s2 := f.start(f.a, "", nil)
	s2.Call(t, "echo", map[string]any{"text": "after"}).OK(t, "a call after the stall")
	// s2 is on the killed proxy's machine (state directory); its
	// journal replay ran before it answered. Its own call committed:
	mcptest.Eventually(t, "the call after the stall committed", func() bool { return f.usage()[f.key(1)].Committed == 2*fleetCost })
	if u := f.usage()[f.key(1)]; u.Reserved != 0 {
		t.Errorf("calls refused store_unavailable during the stall stay reserved (%d) after the next proxy on the machine started: nothing releases them", u.Reserved)
	}
}

// RT7. A proxy killed while it replays a journal (after its claim, the
// rename to .sending-NONCE) leaves the claimed file, which no later proxy
// reads (the glob wants .json at the end): the refused calls it held stay
// charged. The claimed file is made here as such a crash leaves it.
func TestRedTeamJournalClaimedByCrashedProxyIsLost(t *testing.T) {
	f := newFleet(t, 10*fleetCost, 10*fleetCost, 10*fleetCost)
	f.timeouts = "?read_timeout=300ms&write_timeout=300ms"
	pol := f.policy("")
	pol.RevocationList = ""
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s := p.Connect(mcptest.SessionOptions{})
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "a call before the stall")
	f.rtSettled()
	f.srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			f.srv.Resume()
		}
	}()
	for j := range 2 {
		r := s.Call(t, "echo", map[string]any{"text": fmt.Sprint("stalled ", j)})
		if typ, detail := denialData(r); typ != string(proxy.StoreUnavailable) {
			t.Fatalf("a call during the stall: %s: %s, want store_unavailable", typ, detail)
		}
	}
	rtStop(t, p)
	f.srv.Resume()
	resumed = true
	mcptest.Eventually(t, "a stalled reservation to run", func() bool { return f.usage()[f.key(1)].Reserved > 0 })
	state := filepath.Join(f.e.Dir, "state")
	journals, _ := filepath.Glob(filepath.Join(state, "*.unsent-*.json"))
	if len(journals) != 1 {
		t.Fatalf("the stopped proxy's journal: %v", journals)
	}
	// A proxy claimed it and was killed before it sent it.
	if err := os.Rename(journals[0], journals[0]+".sending-0123456789abcdef01234567"); err != nil {
		t.Fatal(err)
	}
	_, s2 := f.start(f.a, "", nil)
	s2.Call(t, "echo", map[string]any{"text": "after"}).OK(t, "a call after the stall")
	mcptest.Eventually(t, "the call after the stall committed", func() bool { return f.usage()[f.key(1)].Committed == 2*fleetCost })
	if u := f.usage()[f.key(1)]; u.Reserved != 0 {
		t.Errorf("the journal a crashed proxy claimed is never sent: calls refused during the stall stay reserved (%d)", u.Reserved)
	}
}

// RT8. store recover reads each audit log with Open (a log whose proxy
// still runs) and never says that a log does not end at its final
// checkpoint: a log cut back (its last entries removed, or its proxy
// killed) is rebuilt short, the reset is lifted, and nothing in the
// output names the log. The rebuilt spend is below what was forwarded.
func TestRedTeamRecoverSaysNothingOfATruncatedLog(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	log := filepath.Join(f.e.Dir, "audit.log")
	p, s := f.start(f.a, "proxy_key: "+f.e.KeyFile(mcptest.NewKey(t, "p"))+"\naudit_log: "+log+"\n", nil)
	n, _, _ := rtDrain(t, s, 20)
	f.rtSettled()
	rtStop(t, p)
	if err := f.srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	mcptest.WriteFile(t, log, strings.Join(lines[:len(lines)/2], ""))
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log)
	t.Logf("store recover: exit %d\n%s%s", code, out, errs)
	rebuilt := f.usage()[f.key(1)].Committed / fleetCost
	if code == 0 && rebuilt < n && !strings.Contains(out, log) {
		t.Errorf("store recover rebuilt %d of the %d calls forwarded, lifted the reset, and its output does not name %s, which ends without its final checkpoint", rebuilt, n, log)
	}
}
