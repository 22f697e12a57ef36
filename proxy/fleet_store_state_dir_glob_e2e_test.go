//go:build unix

package proxy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// RT6-11: a state directory whose path holds a glob metacharacter
// ("/srv/delegateos[prod]/state", "/data/team[1]/…": a valid absolute
// path). The budget package found its files with filepath.Glob on
// filepath.Join(stateDir, "…*…"): the dead live records (deadLive), the
// counts files machineID checks against the machine ID, the other
// revocation copies, the journals. In such a path "[1]" is a character
// class, which matches "1", not "[1]": nothing is found, and the error
// of a malformed class is dropped (paths, _ := filepath.Glob). Here:
// the killed-within-the-second test (RT5-3) with the state directory
// ".../st[1]": the restarted proxy folds no live record and, Redis having
// lost the same writes, forwarded 20 more: 40 on 30. Fixed: every lookup
// in the state directory lists it (fsutil.GlobIn) and matches the names
// only; an error listing it is an error.
func TestE2EFaultStateDirWithGlobCharacters(t *testing.T) {
	f := newStoreFleet(t)
	state := filepath.Join(t.TempDir(), "st[1]")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"DELEGATEOS_STATE_DIR=" + state}
	start := func(want func(int) bool) (*mcptest.Process, *mcptest.Session) {
		p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: env, WantExit: want})
		return p, p.Connect(mcptest.SessionOptions{})
	}
	seenFile := func() string {
		es, _ := os.ReadDir(state)
		for _, e := range es {
			if strings.HasSuffix(e.Name(), ".seen.json") {
				return filepath.Join(state, e.Name())
			}
		}
		return ""
	}
	p1, s1 := start(func(int) bool { return true }) // killed below
	n, _, _ := drain(t, s1, 10)
	f.settled()
	kept := func() bool {
		b, _ := os.ReadFile(seenFile())
		var st struct {
			MSeen map[string]int64 `json:"mseen"`
		}
		json.Unmarshal(b, &st)
		for _, v := range st.MSeen {
			if v == n {
				return true
			}
		}
		return false
	}
	mcptest.Eventually(t, "machine 1's counts kept", kept)
	lock, err := os.OpenFile(seenFile()+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	snap := f.snapshot()
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
	p2, s2 := start(nil)
	more, typ, detail := drain(t, s2, 40)
	f.sameAsUpstreams([]*mcptest.Process{p2}, more)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("state directory %s: machine 1 made %d calls, killed within a second of the last %d, Redis lost them (back to %d): its restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset (as with a plain path)", state, n+m, m, n, more, n+m+more, typ, detail)
	}
}
