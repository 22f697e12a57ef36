//go:build unix

package fsutil

import (
	"io/fs"
	"syscall"
)

// Links is the number of names (hard links) the file fi describes has; 1
// when the system does not say.
func Links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
