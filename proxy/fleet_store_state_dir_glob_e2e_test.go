//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
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
	n, m, snap, lock := f.killedWithinTheSecond(func() (*mcptest.Process, *mcptest.Session) {
		return start(func(int) bool { return true }) // killed
	}, seenFile)
	lock.Close()
	f.restore(snap)
	p2, s2 := start(nil)
	more, typ, detail := drain(t, s2, 40)
	f.sameAsUpstreams([]*mcptest.Process{p2}, more)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("state directory %s: machine 1 made %d calls, killed within a second of the last %d, Redis lost them (back to %d): its restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset (as with a plain path)", state, n+m, m, n, more, n+m+more, typ, detail)
	}
}
