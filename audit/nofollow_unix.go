//go:build unix

package audit

import "syscall"

// oNoFollow refuses to open a symbolic link as the log.
const oNoFollow = syscall.O_NOFOLLOW
