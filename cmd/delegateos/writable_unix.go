//go:build unix

package main

import (
	"path/filepath"
	"syscall"
)

// notWritable says why this process cannot write path, or create and
// replace files beside it (the directory): nil when it can. It asks the
// kernel (access(2) with W_OK), which knows read-only mounts (systemd's
// ProtectSystem, ReadOnlyPaths) and immutable files, which mode bits do
// not show.
func notWritable(path string, dirToo bool) error {
	if err := syscall.Access(path, 2); err != nil { // W_OK
		return err
	}
	if dirToo {
		return syscall.Access(filepath.Dir(path), 2)
	}
	return nil
}
