//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team 7 (rtstore7), RT7-7: the RT6-3 wedge in the revocation list's
// durable copy. store8 made budget's state files (counts, index,
// machine-id, machine-instances, live records) be read O_NOFOLLOW|
// O_NONBLOCK, regular only, and chain's ended copy uses
// fsutil.OpenRegular; but the machine's copy of a Redis revocation list
// in the same state directory (redis-HASH.revocations.json, and any
// other redis-*.revocations.json, which gate.openRevocations globs and
// loads as "another list's copy") is read by revocation.File.read with
// os.Open, which follows a symbolic link and waits on a FIFO for ever.
// A copy replaced by a symlink to a FIFO (or a stray FIFO of that name
// pattern) hangs the start: the proxy neither serves nor refuses.
//
// Broke before (the start hung); held: revocation list files are opened
// with fsutil.OpenRegular (O_NONBLOCK), and readOpenList refuses what is
// not a regular file: the start is refused naming the copy. (A policy's
// own list file may still be a symbolic link: a ConfigMap's files are.)
func TestE2EFaultRevocationCopySymlinkToFIFORefused(t *testing.T) {
	f := newStoreFleet(t)
	p, s := f.start(f.a, "", nil)
	if n, typ, detail := drain(t, s, 1); n != 1 {
		t.Fatalf("the first call: %s: %s", typ, detail)
	}
	stopProxy(t, p)
	// No entry revoked yet, so no copy written: a copy of another list's
	// name (gate.openRevocations loads every redis-*.revocations.json of
	// the directory) is the same as the machine's own.
	copies := []string{filepath.Join(f.e.Dir, "state", "redis-0123456789abcdef.revocations.json")}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fifo, copies[0]); err != nil {
		t.Fatal(err)
	}
	q := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, WantExit: func(int) bool { return true }})
	t.Cleanup(func() { q.Cmd.Process.Kill() })
	// A start refused takes well under a second; 15 s is a hang.
	if !q.WaitExit(15 * time.Second) {
		t.Fatalf("%s a symlink to a FIFO: the proxy neither started nor refused in 15 s (its start hangs reading it)", copies[0])
	}
	if q.ExitCode() != 2 || !strings.Contains(q.Stderr.String(), copies[0]) {
		t.Errorf("%s a symlink to a FIFO: exit %d, want 2 naming it: %s", copies[0], q.ExitCode(), q.Stderr.String())
	}
}
