//go:build unix

package proxy_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
)

// gateRelay relays connections to a Redis server; once armed with a
// pattern, the first chunk from the server holding it is held (and held
// reported) until release: a reply delayed at a chosen moment.
type gateRelay struct {
	addr    string
	mu      sync.Mutex
	pattern []byte
	held    chan struct{}
	open    chan struct{}
}

func newGateRelay(t *testing.T, server string) *gateRelay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gateRelay{addr: l.Addr().String(), held: make(chan struct{}), open: make(chan struct{})}
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		l.Close()
		g.release()
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
	})
	go func() {
		for {
			cc, err := l.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", server)
			if err != nil {
				cc.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, cc, sc)
			cmu.Unlock()
			go io.Copy(sc, cc)
			go func() {
				defer cc.Close()
				b := make([]byte, 64<<10)
				for {
					n, err := sc.Read(b)
					if n > 0 {
						g.mu.Lock()
						hit := g.pattern != nil && bytes.Contains(b[:n], g.pattern)
						if hit {
							g.pattern = nil
						}
						g.mu.Unlock()
						if hit {
							close(g.held)
							<-g.open
						}
						if _, err := cc.Write(b[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return g
}

// arm holds the next chunk from the server that contains pattern.
func (g *gateRelay) arm(pattern string) {
	g.mu.Lock()
	g.pattern = []byte(pattern)
	g.mu.Unlock()
}

// release lets the held chunk through.
func (g *gateRelay) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}
