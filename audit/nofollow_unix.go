//go:build unix

package audit

import (
	"errors"
	"os"
	"syscall"
)

// oNoFollow refuses to open a symbolic link as the log.
const oNoFollow = syscall.O_NOFOLLOW

// lockLog locks the open log itself, besides its lock file: a second
// writer reaching it by another name (a hard link) is refused too.
func lockLog(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrInUse
		}
		return err
	}
}
