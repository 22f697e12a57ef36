//go:build unix

package stdio

import (
	"os"
	"runtime"
	"syscall"
)

// Pollable returns f, standard input or output of a relay, switched to
// non-blocking mode and opened anew so that Go's poller serves it, when it
// is a pipe or a socket; restore puts blocking mode back for whoever
// shares the descriptor after the proxy exits. A blocking descriptor is
// read and written in system calls that hold a thread each, and the Go
// runtime then wakes every 20 µs to take their processors back: on two
// cores that cost the relay a tenth of its throughput. f is left as it is
// when it is anything else (a terminal, a file) or shares its file with
// stderr, which is written in blocking mode.
func Pollable(f, stderr *os.File) (_ *os.File, restore func()) {
	unchanged := func() {}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f, unchanged
	}
	if sameFile(f, stderr) {
		return f, unchanged
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return f, unchanged
	}
	var fd int
	var already bool
	var nbErr error
	if err := sc.Control(func(d uintptr) {
		fd = int(d)
		fl, _, errno := syscall.Syscall(syscall.SYS_FCNTL, d, syscall.F_GETFL, 0)
		if errno != 0 {
			nbErr = errno
			return
		}
		if already = fl&syscall.O_NONBLOCK != 0; !already {
			nbErr = syscall.SetNonblock(fd, true)
		}
	}); err != nil || nbErr != nil || already {
		// Already non-blocking, f was given to the poller when it was
		// opened.
		return f, unchanged
	}
	// os.NewFile registers a descriptor that is already non-blocking with
	// the poller. The new File must not be closed or collected while the
	// descriptor is in use: restore keeps it alive until it has run.
	nf := os.NewFile(uintptr(fd), f.Name())
	return nf, func() {
		_ = syscall.SetNonblock(fd, false)
		runtime.KeepAlive(nf)
	}
}

// sameFile reports whether a and b are the same pipe, socket or file.
func sameFile(a, b *os.File) bool {
	if b == nil {
		return false
	}
	sa, errA := a.Stat()
	sb, errB := b.Stat()
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
