//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redisconn"
)

// Red team 7 (rtstore7), RT7-8: the RT6-3 wedge in the journals. A
// starting proxy replays every journal of the store in its state
// directory (redis-HASH.unsent-*: what a proxy that exited could not
// send) before it serves: budget.Redis.replay opens each with
// openLocked (O_RDWR, following a symbolic link, no check that it is a
// regular file) and io.ReadAll's it. A journal that is a FIFO (or a
// symlink to one) is opened at once (O_RDWR does not wait for a writer),
// flocked, and then read for ever: the start hangs. (A symlink to
// /dev/zero would be read until the memory runs out — not run here.)
//
// Broke before (the start hung, holding the FIFO open); held: journals
// are opened as live records are (openJournal → openRecord: O_NOFOLLOW|
// O_NONBLOCK, regular only, at most their size), and one that is not a
// regular file is skipped (it holds no release): the proxy serves.
func TestE2EFaultJournalFIFODoesNotHangTheStart(t *testing.T) {
	f := newStoreFleet(t)
	pol := f.policy("")
	if err := os.MkdirAll(filepath.Join(f.e.Dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(f.e.Dir, "state", redisconn.CanonicalStateName(pol.SpendStore, ".unsent-rt7"))
	if err := syscall.Mkfifo(journal, 0o600); err != nil {
		t.Fatal(err)
	}
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	if n, typ, detail := drain(t, p.Connect(mcptest.SessionOptions{}), 1); n != 1 {
		t.Errorf("a proxy started beside a journal that is a FIFO: %s: %s; want the call forwarded", typ, detail)
	}
	stopProxy(t, p)
}
