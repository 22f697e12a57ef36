//go:build !unix

package fsutil

import "io/fs"

// Links is the number of names (hard links) the file fi describes has;
// this system does not say, so 1.
func Links(fs.FileInfo) uint64 { return 1 }

// ID is the device and inode numbers of the file fi describes, and its
// owner's user ID; ok is false when the system does not say.
func ID(fs.FileInfo) (dev, ino uint64, uid uint32, ok bool) { return 0, 0, 0, false }

// ONoFollow is the open flag that refuses to follow a symbolic link in the
// last element of the path (0 where the system has none).
const ONoFollow = 0

// ONonBlock is the open flag that does not wait on a FIFO (0 where the
// system has none).
const ONonBlock = 0
