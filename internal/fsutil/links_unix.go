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

// ID is the device and inode numbers of the file fi describes, and its
// owner's user ID; ok is false when the system does not say.
func ID(fi fs.FileInfo) (dev, ino uint64, uid uint32, ok bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino), st.Uid, true
	}
	return 0, 0, 0, false
}

// ONoFollow is the open flag that refuses to follow a symbolic link in the
// last element of the path (0 where the system has none).
const ONoFollow = syscall.O_NOFOLLOW

// ONonBlock is the open flag that does not wait on a FIFO (0 where the
// system has none).
const ONonBlock = syscall.O_NONBLOCK
