//go:build unix

package budget

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// openLocked opens (creating) the journal at path and takes an exclusive
// flock on it without waiting: the kernel drops it when its holder exits,
// however it exits, so a journal whose proxy crashed is taken up by the
// next, and a live proxy's is left alone. A symbolic link at path is
// an error, never followed (red team 9, RT9-1).
func openLocked(path string, create bool) (*os.File, error) {
	flag := os.O_RDWR | syscall.O_NOFOLLOW
	if create {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// lockWait opens (creating) the lock file at path and waits for an
// exclusive flock on it; closing the file drops it. The proxies of a
// machine take it around a read, merge and write of the counts they keep,
// so that none drops another's raise. Opened as every other file of the
// state directory is (see readStateFile): not following a symbolic link,
// not waiting on a FIFO, a regular file only — a lock file that was a
// link out of the directory made the proxy create and lock the file it
// named, wherever it was (red team 9, RT9-1).
func lockWait(path string) (*os.File, error) {
	// A lock taken on a file deleted or replaced meanwhile (an operator's
	// rm of the state directory's locks) excludes no one: the next
	// locker makes a new file. Taken again on the file at the path.
	for range 8 {
		f, err := lockWaitOnce(path)
		if err != nil || lockHeld(f, path) {
			return f, err
		}
		f.Close()
	}
	return nil, fmt.Errorf("%s: %w", path, errLockLost)
}

// errLockLost is a lock file found deleted or replaced while held.
var errLockLost = errors.New("the lock file was deleted or replaced while held (removed by hand?)")

// lockHeld reports whether f, a lock file held, is still the file at
// path (fstat against lstat: device and inode).
func lockHeld(f *os.File, path string) bool {
	fi, ferr := f.Stat()
	pi, perr := os.Lstat(path)
	return ferr == nil && perr == nil && os.SameFile(fi, pi)
}

func lockWaitOnce(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, &os.PathError{Op: "open", Path: path, Err: errors.New("a symbolic link, not a lock file delegateos makes")}
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("not a regular file (mode %s), not a lock file delegateos makes", fi.Mode())}
		}
		return nil, err
	}
	// Waited for at most lockWaitMax: a holder that does not let go (a
	// proxy of the machine stopped, SIGSTOP or a frozen container, inside
	// its write of the counts) left every other proxy's exit hanging for
	// as long (red team 9, RT9-3). The callers fail closed: a start is
	// refused, a counts write is left to the live record (kept, and
	// folded by the next proxy started), a fold to the next write. The
	// wait is a blocking flock (seen in /proc/locks) in a goroutine; one
	// given up on is left to end by itself (its file closed then, never
	// holding the lock), and while it waits, at most one per path, the
	// next waits on that path are given up at once.
	if w, ok := lockAbandoned.Load(path); ok {
		select {
		case <-w.(chan struct{}):
			lockAbandoned.CompareAndDelete(path, w)
		default:
			f.Close()
			return nil, lockHeldError(path)
		}
	}
	var mu sync.Mutex
	gaveUp := false
	got := make(chan error, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		var err error
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if gaveUp {
			f.Close()
			return
		}
		got <- err
	}()
	t := time.NewTimer(lockWaitMax)
	defer t.Stop()
	select {
	case err = <-got:
	case <-t.C:
		mu.Lock()
		select {
		case err = <-got: // just taken
		default:
			gaveUp = true
			lockAbandoned.Store(path, ended)
			err = lockHeldError(path)
		}
		mu.Unlock()
		if gaveUp {
			return nil, err
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// lockAbandoned holds, by path, a wait for a lock file given up on
// (lockWait) until it ends: closed then.
var lockAbandoned sync.Map

func lockHeldError(path string) error {
	return fmt.Errorf("%s is held by another process for more than %s (a proxy of this machine stopped, or frozen, while it held it?)", path, lockWaitMax)
}

// lockWaitMax bounds the wait for a lock file of the state directory: its
// holders hold it for a read and a write of a small file.
var lockWaitMax = 10 * time.Second

// openJournal opens a journal left in the state directory, to replay it,
// as a live record is opened (openRecord): its flock taken without
// waiting, not following a symbolic link, not waiting on a FIFO, a
// regular file only, read at most to its size (bounded); a FIFO there
// hung the start for ever (red team 7, RT7-8).
func openJournal(path string) (*os.File, []byte, error) { return openRecord(path, true) }
