//go:build unix && !race

package stdio

import (
	"io"
	"syscall"
	"time"
	"unsafe"
)

// A relay moves many small messages through pipes. Each read or write made
// through *os.File enters the system call as one that may block: the Go
// runtime then wakes its monitor thread (sysmon) if it was asleep, and
// that thread goes on waking every 20 µs for a millisecond or more, which
// costs a relay that keeps going idle and busy again a tenth of its CPU.
// On a non-blocking descriptor that Go's poller serves, a read or write
// never blocks (it fails with EAGAIN, and the poller waits), so RawReader
// and RawWriter make those calls directly (syscall.RawSyscall), waiting in
// the poller as *os.File does.
//
// Not under the race detector: it takes reads and writes made through the
// syscall package as synchronization (what one goroutine did before a write
// happens before what another does after reading it back), and raw calls
// would hide that, so that every relay test would report races that are
// not there. A race build reads and writes through *os.File.

// rawFile is a file served by Go's poller: *os.File, or what embeds one
// (exec.Cmd's pipes).
type rawFile interface {
	syscall.Conn
	SetDeadline(time.Time) error
}

// pollable returns f's raw connection when f is a non-blocking descriptor
// served by Go's poller; ok is false otherwise (a terminal, a regular
// file, a blocking pipe), for which a raw call could block its thread
// unseen by the scheduler.
func pollable(f any) (syscall.RawConn, bool) {
	rf, ok := f.(rawFile)
	if !ok {
		return nil, false
	}
	// Only a descriptor in the poller takes deadlines.
	if rf.SetDeadline(time.Time{}) != nil {
		return nil, false
	}
	rc, err := rf.SyscallConn()
	if err != nil {
		return nil, false
	}
	nonblocking := false
	if err := rc.Control(func(fd uintptr) {
		fl, _, errno := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nonblocking = errno == 0 && fl&syscall.O_NONBLOCK != 0
	}); err != nil || !nonblocking {
		return nil, false
	}
	return rc, true
}

// RawReader returns r reading through raw system calls when it is a
// non-blocking descriptor served by Go's poller, and r itself otherwise.
// It reads as r does: what is there (at least a byte), io.EOF at the end.
func RawReader(r io.Reader) io.Reader {
	rc, ok := pollable(r)
	if !ok {
		return r
	}
	return &rawReader{rc: rc}
}

// RawWriter is RawReader for writing: every byte is written, or an error
// returned.
func RawWriter(w io.Writer) io.Writer {
	rc, ok := pollable(w)
	if !ok {
		return w
	}
	return &rawWriter{rc: rc}
}

type rawReader struct{ rc syscall.RawConn }

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			r1, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait in the poller
			}
			n, errno = int(r1), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

type rawWriter struct{ rc syscall.RawConn }

func (w *rawWriter) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := w.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			r1, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch {
			case e == 0 && r1 == 0:
				errno = syscall.EIO // a write that wrote nothing and said nothing
				return true
			case e == 0:
				n += int(r1)
			case e == syscall.EINTR:
			case e == syscall.EAGAIN:
				return false // wait in the poller for room
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, errno
	}
	return n, nil
}
