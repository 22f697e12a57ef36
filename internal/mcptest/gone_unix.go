//go:build unix

package mcptest

import (
	"errors"
	"syscall"
)

// ProcessGone reports whether pid no longer exists, not even as a zombie
// waiting to be reaped.
func ProcessGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func gone(pid int) bool { return ProcessGone(pid) }

func kill(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
