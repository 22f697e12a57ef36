//go:build unix

package stdio

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// blockingPipe is a pipe as a parent process hands it to the proxy: both
// ends in blocking mode, outside Go's poller.
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// nonblocking reads the descriptor's mode (without Fd, which would set
// blocking mode itself).
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	sc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl uintptr
	var errno syscall.Errno
	if err := sc.Control(func(fd uintptr) {
		fl, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	}); err != nil || errno != 0 {
		t.Fatal(err, errno)
	}
	return fl&syscall.O_NONBLOCK != 0
}

// A blocking pipe comes back served by the poller (it takes deadlines,
// which only a polled descriptor does), still carries the data, and is
// blocking again after restore.
func TestPollablePipe(t *testing.T) {
	r, w := blockingPipe(t)
	_, stderr := blockingPipe(t)
	if err := r.SetReadDeadline(time.Now()); !errors.Is(err, os.ErrNoDeadline) {
		t.Fatalf("a blocking pipe took a deadline (%v): the test proves nothing", err)
	}
	fd := r.Fd()
	p, restore := Pollable(r, stderr)
	if p == r {
		t.Fatal("the pipe was left as it was")
	}
	if err := p.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatalf("the pollable pipe takes no deadline: %v", err)
	}
	if _, err := p.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline returned %v", err)
	}
	if err := p.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("frame\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := p.Read(buf); err != nil || string(buf[:n]) != "frame\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if !nonblocking(t, p) {
		t.Fatal("the pollable pipe is in blocking mode")
	}
	restore()
	if nonblocking(t, r) {
		t.Fatal("restore left the descriptor non-blocking")
	}
	if p.Fd() != fd {
		t.Fatalf("fd %d, want %d", p.Fd(), fd)
	}
}

// Files, and a pipe that is also stderr, are left alone.
func TestPollableLeavesOthers(t *testing.T) {
	_, stderr := blockingPipe(t)
	file, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if p, _ := Pollable(file, stderr); p != file {
		t.Fatal("a regular file was replaced")
	}
	r, w := blockingPipe(t)
	if p, _ := Pollable(r, w); p != r || nonblocking(t, r) {
		t.Fatal("a pipe shared with stderr was made non-blocking")
	}
}

// A descriptor that is non-blocking already is Go's poller's from the
// start: it is left as it is, and stays non-blocking.
func TestPollableAlreadyNonblocking(t *testing.T) {
	r, _ := blockingPipe(t)
	_, stderr := blockingPipe(t)
	if err := syscall.SetNonblock(int(r.Fd()), true); err != nil {
		t.Fatal(err)
	}
	p, restore := Pollable(r, stderr)
	restore()
	if p != r || !nonblocking(t, r) {
		t.Fatal("a non-blocking descriptor was replaced or changed")
	}
}
