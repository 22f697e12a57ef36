package redisset

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

// delayRelay listens on a free port and relays each connection to addr,
// holding every byte from the server for delay before the client gets
// it: a network path an attacker slows down without breaking it. The
// delay starts at zero and is set through the returned pointer.
func delayRelay(t *testing.T, addr string) (string, *atomic.Int64) {
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

// A copy whose replies from Redis are delayed (not lost) must not answer
// from a copy older than StaleAfter: its pongs arrive steadily, but each
// tells only what Redis held when it sent it.
func TestCopyDelayedRepliesStale(t *testing.T) {
	srv := redistest.Start(t)
	const delay = 3 * time.Second
	relay, slow := delayRelay(t, srv.Addr())
	c, err := redisconn.Open("redis://" + relay + "/0?read_timeout=10s&write_timeout=10s&dial_timeout=10s")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cp, err := Open(c, Options{What: "test set", Hash: "h", Channel: "ch", Check: func(string, string) error { return nil }}, 4*delay)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	slow.Store(int64(delay))
	time.Sleep(delay) // the delayed pongs flow steadily now
	direct := srv.Client()
	if _, err := Add(context.Background(), direct, "h", "ch", "revoked", "1", "test set"); err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	for time.Since(wrote) < delay {
		_, ok, err := cp.Get("revoked")
		if since := time.Since(wrote); err == nil && !ok && since > StaleAfter+200*time.Millisecond {
			t.Fatalf("the copy answered without the entry %v after it was written (StaleAfter %v)", since.Round(time.Millisecond), StaleAfter)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
