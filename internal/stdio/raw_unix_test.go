//go:build unix && !race

package stdio

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// pollablePipe is a pipe whose ends Go's poller serves (os.Pipe).
func pollablePipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// A reader waiting on an empty pipe gets what is written later (it waits
// in the poller, it does not fail with EAGAIN), then io.EOF once the
// writer has closed; a writer whose bytes exceed the pipe's capacity
// (4 MiB against 64 KiB) waits for room and writes them all, in order.
func TestRawPipe(t *testing.T) {
	r, w := pollablePipe(t)
	rr, rw := RawReader(r), RawWriter(w)
	if _, ok := rr.(*rawReader); !ok {
		t.Fatal("a pollable pipe's reader is not raw")
	}
	if _, ok := rw.(*rawWriter); !ok {
		t.Fatal("a pollable pipe's writer is not raw")
	}
	want := make([]byte, 4<<20)
	for i := range want {
		want[i] = byte(i * 7 / 5)
	}
	got := make(chan []byte, 1)
	go func() {
		b, err := io.ReadAll(rr)
		if err != nil {
			t.Error(err)
			r.Close() // the writer fails rather than waiting for room forever
		}
		got <- b
	}()
	// The reader may be waiting already: the first byte arrives alone.
	if n, err := rw.Write(want[:1]); n != 1 || err != nil {
		t.Fatalf("wrote %d, %v", n, err)
	}
	if n, err := rw.Write(want[1:]); n != len(want)-1 || err != nil {
		t.Fatalf("wrote %d of %d, %v", n, len(want)-1, err)
	}
	if n, err := rw.Write(nil); n != 0 || err != nil {
		t.Fatalf("an empty write: %d, %v", n, err)
	}
	w.Close()
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("read %d bytes, not the %d written", len(b), len(want))
	}
	if n, err := rr.Read(make([]byte, 8)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("a read after EOF: %d, %v", n, err)
	}
	// Closed under it, it fails instead of reading another descriptor.
	r.Close()
	if _, err := rr.Read(make([]byte, 8)); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("a read of a closed pipe: %v", err)
	}
}

// A writer whose reader is gone gets an error (EPIPE), not a hang.
func TestRawWriteBrokenPipe(t *testing.T) {
	r, w := pollablePipe(t)
	r.Close()
	if _, err := RawWriter(w).Write([]byte("x")); err == nil {
		t.Fatal("a write to a pipe with no reader succeeded")
	}
}

// A blocking pipe, a regular file and what is not a file are returned as
// they are: a raw call on a blocking descriptor would hold its thread
// unseen by the scheduler.
func TestRawLeavesOthers(t *testing.T) {
	r, w := blockingPipe(t)
	if RawReader(r) != io.Reader(r) || RawWriter(w) != io.Writer(w) {
		t.Fatal("a blocking pipe was made raw")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if RawReader(f) != io.Reader(f) || RawWriter(f) != io.Writer(f) {
		t.Fatal("a regular file was made raw")
	}
	var b bytes.Buffer
	if RawReader(&b) != io.Reader(&b) || RawWriter(&b) != io.Writer(&b) {
		t.Fatal("a buffer was wrapped")
	}
	// Made non-blocking but outside the poller (os.NewFile of a blocking
	// descriptor, switched afterwards): not raw either.
	r2, _ := blockingPipe(t)
	sc, _ := r2.SyscallConn()
	sc.Control(func(fd uintptr) { setNonblock(t, fd) })
	if RawReader(r2) != io.Reader(r2) {
		t.Fatal("a descriptor outside the poller was made raw")
	}
	// In the poller but switched to blocking mode (Fd does that).
	r3, w3 := pollablePipe(t)
	r3.Fd()
	w3.Fd()
	if RawReader(r3) != io.Reader(r3) || RawWriter(w3) != io.Writer(w3) {
		t.Fatal("a descriptor in blocking mode was made raw")
	}
}

func setNonblock(t *testing.T, fd uintptr) {
	t.Helper()
	if err := syscall.SetNonblock(int(fd), true); err != nil {
		t.Fatal(err)
	}
}
