//go:build !linux

package redistest

import "syscall"

// procAttr is nil where the system cannot tie the server's life to the
// test's: a crashed test may leave it running.
func procAttr() *syscall.SysProcAttr { return nil }
