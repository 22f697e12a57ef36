//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package revocation

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on path, creating it if needed. The
// lock belongs to this open file, so it excludes other goroutines of this
// process as well as other processes, and the kernel drops it if the
// process dies.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, listFileMode)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
