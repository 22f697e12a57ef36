//go:build linux && !(amd64 || arm64)

package fsutil

import "syscall"

// fstatat is syscall.Stat, which allocates a C string for the path.
func fstatat(p *StatPath, st *syscall.Stat_t) error {
	for {
		err := syscall.Stat(p.path, st)
		if err != syscall.EINTR {
			return err
		}
	}
}
