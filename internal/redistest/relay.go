package redistest

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// DelayRelay listens on a free port and relays each connection to addr,
// holding every byte from the server for delay before the client gets
// it: a network path an attacker slows down without breaking it. The
// delay starts at zero and is set through the returned pointer.
func DelayRelay(t testing.TB, addr string) (string, *atomic.Int64) {
	delay := new(atomic.Int64)
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
			go func() {
				for c := range q {
					time.Sleep(time.Until(c.at))
					if _, err := cc.Write(c.b); err != nil {
						return
					}
				}
				cc.Close()
			}()
		}
	}()
	return l.Addr().String(), delay
}
