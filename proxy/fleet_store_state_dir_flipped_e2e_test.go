//go:build linux

package proxy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team 9 (rtstore9), RT9-4: the state directory's path flipped to a
// copy and back (A → B → A: a symbolic link re-pointed, a bind mount put
// over the path and taken off) while proxy 1 runs. Proxy 2, started on
// B, makes 10 calls and exits; proxy 1 makes one more, learns B's counts
// (20) and writes 21 into B's counts file. The path is pointed back at A:
// proxy 1 maps A's counts epoch and takes a new live record in A (locked:
// a running proxy's), but A's counts file still says 10 — what proxy 1
// knows is only in its memory and its locked record, which a starter
// skips. Redis goes back to a snapshot of 10: proxy 3, started on A,
// spent (41 on 30).
//
// Broke before (41 on 30; this form then times out waiting for A's counts
// file to hold 21); held: a proxy that maps another counts epoch (its
// path now names another directory, or the epoch was replaced) writes
// its counts file at once, so the directory at its path holds what it
// knows, and proxy 3 refuses store_reset.
func TestE2EFaultStateDirFlippedBackWhileRunning(t *testing.T) {
	f := newStoreFleet(t)
	base := t.TempDir()
	a, b, link := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "st")
	if err := os.Mkdir(a, 0o700); err != nil {
		t.Fatal(err)
	}
	point := func(dir string) {
		os.Remove(link + ".new")
		if err := os.Symlink(dir, link+".new"); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(link+".new", link); err != nil {
			t.Fatal(err)
		}
	}
	point(a)
	start := func() (*mcptest.Process, *mcptest.Session) {
		p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: []string{"DELEGATEOS_STATE_DIR=" + link}})
		return p, p.Connect(mcptest.SessionOptions{})
	}
	counted := func(dir string, n int64) {
		t.Helper()
		mcptest.Eventually(t, "counts written in "+filepath.Base(dir), func() bool {
			m, _ := filepath.Glob(filepath.Join(dir, "*.seen.json"))
			if len(m) != 1 {
				return false
			}
			b, _ := os.ReadFile(m[0])
			return containsMSeen(b, n)
		})
	}
	p1, s1 := start()
	if n, typ, detail := drain(t, s1, 10); n != 10 {
		t.Fatalf("proxy 1's calls: %d, %s: %s", n, typ, detail)
	}
	f.settled()
	counted(a, 10)
	snap := f.snapshot()
	copyStateDir(t, a, b)
	point(b)
	waitEpochMapped(t, p1, filepath.Join(b, "counts-epoch"))
	p2, s2 := start()
	if n, typ, detail := drain(t, s2, 10); n != 10 {
		t.Fatalf("proxy 2's calls: %d, %s: %s", n, typ, detail)
	}
	f.settled()
	stopProxy(t, p2)
	if n, typ, detail := drain(t, s1, 1); n != 1 {
		t.Fatalf("proxy 1's 11th call: %s: %s", typ, detail)
	}
	f.settled()
	counted(b, 21)
	point(a)
	waitEpochMapped(t, p1, filepath.Join(a, "counts-epoch"))
	counted(a, 21)
	f.restore(snap)
	p3, s3 := start()
	more, typ, detail := drain(t, s3, 40)
	total := 21 + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("the state dir's path flipped A→B→A while proxy 1 ran (it knew 21 calls); Redis went back to 10: proxy 3 started on A forwarded %d (%d on 30), then %s: %s; want none, store_reset", more, total, typ, detail)
	}
}
