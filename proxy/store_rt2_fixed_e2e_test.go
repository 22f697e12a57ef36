//go:build unix

package proxy_test

// Findings of the second red team of issue 19's store history that are
// fixed (see store_rt2_redteam_test.go for those still open).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// seenFiles returns the *.seen.json files of the test's state directory.
func (f *fleet) seenFiles() []string {
	f.t.Helper()
	m, err := filepath.Glob(filepath.Join(f.e.Dir, "state", "*.seen.json"))
	if err != nil || len(m) == 0 {
		f.t.Fatalf("no seen.json in the state directory: %v", err)
	}
	return m
}

// R2-1. The kept counts file is unreadable (truncated, corrupted, or
// deleted): readSeen (budget/identity.go:302) takes it for "no counts", so
// a restarted proxy accepts Redis back on an older snapshot (RT2 again),
// while the identity file in the same state is refused when corrupt.
func TestE2EFaultCorruptSeenFileRefused(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := rtDrain(t, s1, 10)
	f.rtSettled()
	snap := f.rtSnapshot()
	m, _, _ := rtDrain(t, s1, 40)
	f.rtSettled()
	rtStop(t, p1)
	for _, p := range f.seenFiles() {
		if err := os.WriteFile(p, []byte(`{"id":`), 0o600); err != nil { // cut short
			t.Fatal(err)
		}
	}
	f.rtRestore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, WantExit: func(code int) bool { return code == 2 }})
	if !p2.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("the proxy started on a cut seen.json")
	}
	if !strings.Contains(p2.Stderr.String(), "not a file of seen counts") {
		t.Errorf("the refusal does not name the seen file: %s", p2.Stderr.String())
	}
	f.sameAsUpstreams([]*mcptest.Process{p1}, n+m)
}
