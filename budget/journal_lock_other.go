//go:build !unix

package budget

import (
	"errors"
	"io"
	"os"
)

// openLocked opens (creating) the journal at path. Without flock a live
// proxy's journal may be replayed by another proxy too: every journalled
// command may be sent any number of times.
func openLocked(path string, create bool) (*os.File, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	return os.OpenFile(path, flag, 0o600)
}

// lockWait opens (creating) the lock file at path. Without flock two
// proxies of a machine writing their counts at once may drop one's raise
// (each write is whole).
func lockWait(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

// errLockLost is a lock file found deleted or replaced while held.
var errLockLost = errors.New("the lock file was deleted or replaced while held (removed by hand?)")

// lockHeld: without flock no lock excludes another; nothing to check.
func lockHeld(*os.File, string) bool { return true }

// openJournal opens a journal left in the state directory, to replay it,
// and reads it.
func openJournal(path string) (*os.File, []byte, error) {
	f, err := openLocked(path, false)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile))
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, b, nil
}
