//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// lockTimeout bounds the wait of Lock for a lock file another holder keeps.
const lockTimeout = 10 * time.Second

// Lock takes the lock by creating path exclusively, where flock is not
// available, waiting up to lockTimeout. Unlike flock, the lock outlives a
// holder that crashes, so after lockTimeout the error says how to clear it.
func Lock(path string, mode fs.FileMode) (unlock func(), err error) {
	deadline := time.Now().Add(lockTimeout)
	for {
		unlock, err := TryLock(path, mode)
		if !errors.Is(err, ErrLocked) {
			return unlock, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s has been held for %v; if no other process is running, one crashed: remove the file", path, lockTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TryLock is Lock without the wait: if the lock file exists it returns an
// error wrapping ErrLocked at once.
func TryLock(path string, mode fs.FileMode) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err == nil {
		f.Close()
		return func() { os.Remove(path) }, nil
	}
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%s: %w (if no other process is running, one crashed: remove the file)", path, ErrLocked)
	}
	return nil, err
}
