//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package revocation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// lockTimeout bounds the wait for a lock file another writer holds.
const lockTimeout = 10 * time.Second

// lockFile takes the lock by creating path exclusively, where flock is not
// available. Unlike flock, the lock outlives a writer that crashes while
// holding it, so after lockTimeout the error says how to clear it.
func lockFile(path string) (unlock func(), err error) {
	deadline := time.Now().Add(lockTimeout)
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, listFileMode)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s has been held for %v; if no other writer is running, one crashed: remove the file", path, lockTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
