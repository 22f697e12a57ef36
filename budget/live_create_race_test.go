//go:build unix

package budget

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/redistest"
)

// A live record between its creation and its lock (red team 6, RT6-9).
// An older openLive made the record with open(O_CREATE), then flock. A
// proxy B starting on the machine in between globs the new, empty,
// unlocked file, takes its flock, reads it as a record "torn before its
// header was whole" and, folding, removes it (closeDead(dead, true)).
// Proxy A's flock then succeeds on the unlinked inode: A maps a file no
// one will ever fold, and a kill -9 of A loses every raise it makes (the
// RT5-3 hole: 40 on 30 when Redis loses the same writes); or, if B still
// holds the lock, A's flock fails and A refuses to start ("cannot be
// recorded", a false refusal of two proxies started at once). The window
// is two system calls wide, so this test places it by doing A's open
// itself, exactly as that openLocked did, before B's open.
//
// Held: openLive makes the record under a temporary name (O_EXCL),
// flocks it, writes its header, then renames it into the live.* name (a
// starting proxy then only ever sees whole records, locked or dead); and
// deadLive leaves alone a record without its header younger than a
// minute (an older version's being made: A here).
func TestLiveRecordTakenBeforeItsLock(t *testing.T) {
	url := redistest.Start(t).URL()
	dir := t.TempDir()
	s0, err := OpenRedisIn(url, dir)
	if err != nil {
		t.Fatal(err)
	}
	s0.mu.Lock()
	prefix := s0.livePrefix(s0.ident.ID)
	s0.mu.Unlock()
	// Proxy A, inside openLocked: the file made, its flock not yet taken.
	path := prefix + "proxyA.1"
	fa, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	// Proxy B starts.
	b, err := OpenRedisIn(url, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	defer s0.Close()
	// Proxy A takes its flock.
	lerr := syscall.Flock(int(fa.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	_, serr := os.Stat(path)
	switch {
	case errors.Is(lerr, syscall.EWOULDBLOCK):
		t.Errorf("a proxy starting while another made its live record took the record's lock: the other's start fails")
	case lerr == nil && errors.Is(serr, os.ErrNotExist):
		t.Errorf("a proxy starting while another made its live record removed the record: the other proxy maps an unlinked file, and a kill -9 loses its raises")
	}
}
