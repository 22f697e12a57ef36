//go:build unix

package gate

import (
	"io/fs"
	"syscall"
)

// accessWrite is access(2) with W_OK: EROFS on a read-only mount (even for
// root), EACCES when the permissions refuse this user.
func accessWrite(path string) error {
	if err := syscall.Access(path, 2); err != nil {
		return &fs.PathError{Op: "access", Path: path, Err: err}
	}
	return nil
}
