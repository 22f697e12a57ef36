//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Lock takes an exclusive flock on path, creating the file with mode if
// needed, and waits while another open file holds it. The lock file is left
// in place by unlock: removing it would let a waiter lock a name that a
// newcomer then creates afresh.
func Lock(path string, mode fs.FileMode) (unlock func(), err error) {
	return flock(path, mode, syscall.LOCK_EX)
}

// TryLock is Lock without the wait: if the lock is held it returns an error
// wrapping ErrLocked at once.
func TryLock(path string, mode fs.FileMode) (unlock func(), err error) {
	return flock(path, mode, syscall.LOCK_EX|syscall.LOCK_NB)
}

func flock(path string, mode fs.FileMode, how int) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, mode)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrLocked)
		}
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
