//go:build unix

package budget

import (
	"fmt"
	"os"
	"syscall"
)

// dirIdentity names the directory dir by its device and inode: a copy of
// it (on another host, or beside it) has others.
func dirIdentity(dir string) string {
	fi, err := os.Stat(dir)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("dev:%d ino:%d", uint64(st.Dev), uint64(st.Ino))
}

// fileOwner returns the owner of the file fi describes and this process's
// user.
func fileOwner(fi os.FileInfo) (owner, me int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), os.Getuid(), true
}
