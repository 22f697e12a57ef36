package redistest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// relay listens on a free port and, for each connection, dials addr and
// calls serve with the client's connection and the server's, in a
// goroutine of its own; both are closed when the test ends.
func relay(t testing.TB, addr string, serve func(cc, sc net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			cc, err := l.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", addr)
			if err != nil {
				cc.Close()
				continue
			}
			t.Cleanup(func() { cc.Close(); sc.Close() })
			go serve(cc, sc)
		}
	}()
	return l.Addr().String()
}

// DelayRelay listens on a free port and relays each connection to addr,
// holding every byte from the server for delay before the client gets
// it: a network path an attacker slows down without breaking it. The
// delay starts at zero and is set through the returned pointer.
func DelayRelay(t testing.TB, addr string) (string, *atomic.Int64) {
	delay := new(atomic.Int64)
	t.Helper()
	return relay(t, addr, func(cc, sc net.Conn) {
		go io.Copy(sc, cc)
		type chunk struct {
			at time.Time
			b  []byte
		}
		q := make(chan chunk, 1024)
		go func() {
			defer close(q)
			for {
				b := make([]byte, 32<<10)
				n, err := sc.Read(b)
				if n > 0 {
					q <- chunk{time.Now().Add(time.Duration(delay.Load())), b[:n]}
				}
				if err != nil {
					return
				}
			}
		}()
		for c := range q {
			time.Sleep(time.Until(c.at))
			if _, err := cc.Write(c.b); err != nil {
				return
			}
		}
		cc.Close()
	}), delay
}

// HeldRelay listens on a free port and relays each connection to addr,
// holding what clients send until release is called (or the test ends);
// asked is closed when a client first sends something: the moment a
// process under test makes its first request, held there while the test
// changes what the process is to find next.
func HeldRelay(t testing.TB, addr string) (relayAddr string, asked <-chan struct{}, release func()) {
	t.Helper()
	first, open := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	release = func() { releaseOnce.Do(func() { close(open) }) }
	t.Cleanup(release)
	relayAddr = relay(t, addr, func(cc, sc net.Conn) {
		go func() { io.Copy(cc, sc); cc.Close() }()
		b := make([]byte, 32<<10)
		for {
			n, err := cc.Read(b)
			if n > 0 {
				once.Do(func() { close(first) })
				<-open
				if _, err := sc.Write(b[:n]); err != nil {
					return
				}
			}
			if err != nil {
				sc.Close()
				return
			}
		}
	})
	return relayAddr, first, release
}
