package serve

import (
	"errors"
	"io"
	"testing"
	"time"
)

// An inbox hands the reader every byte in order, then EOF after the
// writer's Close; a write that would pass the limit waits for the reader;
// the reader's closeRead fails every later write and read, waiting ones
// too.
func TestInbox(t *testing.T) {
	q := newInbox(8)
	if _, err := q.Write([]byte("abc\n")); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := q.Write([]byte("defgh\n")) // 10 bytes queued would pass 8
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("a write past the limit did not wait (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	buf := make([]byte, 2)
	if n, err := q.Read(buf); n != 2 || err != nil || string(buf) != "ab" {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	if n, _ := q.Read(buf); string(buf[:n]) != "c\n" {
		t.Fatalf("read %q", buf[:n])
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	q.Close()
	if _, err := q.Write([]byte("late")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("a write after Close: %v", err)
	}
	if b, err := io.ReadAll(q); string(b) != "defgh\n" || err != nil {
		t.Fatalf("read to EOF: %q %v", b, err)
	}

	q = newInbox(4)
	q.Write([]byte("full"))
	go func() {
		_, err := q.Write([]byte("x"))
		wrote <- err
	}()
	time.Sleep(20 * time.Millisecond)
	stop := errors.New("the relay stopped")
	q.closeRead(stop)
	if err := <-wrote; !errors.Is(err, stop) {
		t.Fatalf("a waiting write after closeRead: %v", err)
	}
	if _, err := q.Read(buf); !errors.Is(err, stop) {
		t.Fatalf("a read after closeRead: %v", err)
	}
	r := inboxReader{newInbox(4)}
	r.Close()
	if _, err := r.q.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("a write after the reader's Close: %v", err)
	}
}
