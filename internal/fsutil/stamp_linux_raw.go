//go:build linux && (amd64 || arm64)

package fsutil

import (
	"syscall"
	"unsafe"
)

// atFDCWD is AT_FDCWD: a relative path is resolved against the current
// directory.
var atFDCWD = -100

// fstatat is syscall.Stat without converting the path to a C string on
// every call, which allocates.
func fstatat(p *StatPath, st *syscall.Stat_t) error {
	for {
		_, _, e := syscall.Syscall6(sysFstatat, uintptr(atFDCWD), uintptr(unsafe.Pointer(&p.cpath[0])), uintptr(unsafe.Pointer(st)), 0, 0, 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return e
	}
}
