//go:build unix

package proxy_test

import (
	"bytes"
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
	// fromClient: the pattern is looked for in what the client sends
	// (the command is held before it reaches the server).
	fromClient bool
	skip       int    // occurrences of the pattern let through first
	after      []byte // the pattern is looked for once this has passed
	held       chan struct{}
	dropped    bool // the held chunk is dropped, its connection cut
	open       chan struct{}
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
			go g.pipe(sc, cc, true)
			go g.pipe(cc, sc, false)
		}
	}()
	return g
}

// pipe copies from src to dst, holding the chunk that holds the armed
// pattern when it flows this way.
func (g *gateRelay) pipe(dst, src net.Conn, fromClient bool) {
	defer dst.Close()
	b := make([]byte, 64<<10)
	for {
		n, err := src.Read(b)
		if n > 0 {
			g.mu.Lock()
			if g.after != nil && g.fromClient == fromClient && bytes.Contains(b[:n], g.after) {
				g.after = nil
				g.mu.Unlock()
				if _, err := dst.Write(b[:n]); err != nil {
					return
				}
				continue
			}
			hit := g.pattern != nil && g.after == nil && g.fromClient == fromClient && bytes.Contains(b[:n], g.pattern)
			if hit && g.skip > 0 {
				g.skip, hit = g.skip-1, false
			}
			if hit {
				g.pattern = nil
			}
			g.mu.Unlock()
			if hit {
				close(g.held)
				<-g.open
				g.mu.Lock()
				drop := g.dropped
				g.mu.Unlock()
				if drop {
					src.Close()
					return
				}
			}
			if _, err := dst.Write(b[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// armClient holds the next chunk from a client that contains pattern: the
// command it carries has not reached the server.
func (g *gateRelay) armClient(pattern string) { g.armClientAfter(pattern, 0) }

// armClientSeq is armClient for the first chunk holding pattern after
// one holding after has passed.
func (g *gateRelay) armClientSeq(after, pattern string) {
	g.mu.Lock()
	g.after, g.pattern, g.fromClient = []byte(after), []byte(pattern), true
	g.mu.Unlock()
}

// armClientAfter is armClient letting skip occurrences through first.
func (g *gateRelay) armClientAfter(pattern string, skip int) {
	g.mu.Lock()
	g.pattern, g.fromClient, g.skip = []byte(pattern), true, skip
	g.mu.Unlock()
}

// arm holds the next chunk from the server that contains pattern.
func (g *gateRelay) arm(pattern string) {
	g.mu.Lock()
	g.pattern, g.fromClient = []byte(pattern), false
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

// drop cuts the connection of the held chunk without sending it: its
// process was killed before the command left it.
func (g *gateRelay) drop() {
	g.mu.Lock()
	g.dropped = true
	g.mu.Unlock()
	g.release()
}
