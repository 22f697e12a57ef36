//go:build unix

package fsutil

import (
	"os"
	"syscall"
)

// OpenRegular opens path for reading without waiting on what it is: a FIFO
// swapped in for a file does not block the open (O_NONBLOCK, which changes
// nothing for a regular file). The caller checks the opened file's mode.
func OpenRegular(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
