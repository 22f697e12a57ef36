package mcptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// FrameChecker drains a process's stdout in the background, checks that
// every line is one JSON-RPC message, and hands the bytes to whoever reads
// it. Draining independently of the reader means a client that stops
// reading can never block the process, and every byte up to EOF is checked.
type FrameChecker struct {
	mu      sync.Mutex
	cond    *sync.Cond
	unread  []byte
	err     error
	partial []byte
	bad     []string
	frames  int
	eof     chan struct{}
}

// NewFrameChecker starts draining r.
func NewFrameChecker(r io.Reader) *FrameChecker {
	c := &FrameChecker{eof: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.pump(r)
	return c
}

func (c *FrameChecker) pump(r io.Reader) {
	defer close(c.eof)
	buf := make([]byte, 256<<10)
	for {
		n, err := r.Read(buf)
		c.mu.Lock()
		c.scan(buf[:n])
		c.unread = append(c.unread, buf[:n]...)
		if err != nil {
			if len(c.partial) > 0 {
				c.bad = append(c.bad, fmt.Sprintf("an unterminated last line %q", Clip(c.partial)))
			}
			c.err = err
		}
		c.cond.Broadcast()
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (c *FrameChecker) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.partial = append(c.partial, b...)
			return
		}
		line := b[:i]
		if len(c.partial) > 0 {
			line = append(c.partial, line...)
		}
		if err := checkFrame(line); err != nil {
			c.bad = append(c.bad, fmt.Sprintf("%v: %q", err, Clip(line)))
		} else {
			c.frames++
		}
		c.partial = c.partial[:0]
		b = b[i+1:]
	}
}

// checkFrame accepts exactly one JSON-RPC 2.0 request, notification or
// response.
func checkFrame(line []byte) error {
	line = bytes.TrimSuffix(line, []byte("\r"))
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return fmt.Errorf("not a JSON object (%v)", err)
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return errors.New(`jsonrpc is not "2.0"`)
	}
	_, hasMethod := m["method"]
	_, hasID := m["id"]
	_, hasResult := m["result"]
	_, hasError := m["error"]
	switch {
	case hasMethod && !hasResult && !hasError:
		return nil
	case !hasMethod && hasID && hasResult != hasError:
		return nil
	}
	return errors.New("neither a request, a notification nor a response")
}

// Read reads what the process wrote, blocking until there is some or the
// stream has ended.
func (c *FrameChecker) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.unread) == 0 && c.err == nil {
		c.cond.Wait()
	}
	if len(c.unread) == 0 {
		return 0, c.err
	}
	n := copy(p, c.unread)
	c.unread = c.unread[n:]
	if len(c.unread) == 0 {
		c.unread = nil
	}
	return n, nil
}

// WaitEOF waits up to d for the stream to end and reports whether it did.
func (c *FrameChecker) WaitEOF(d time.Duration) bool {
	select {
	case <-c.eof:
		return true
	case <-time.After(d):
		return false
	}
}

// Frames is how many valid frames the process has written so far.
func (c *FrameChecker) Frames() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frames
}

// Violations describes every line so far that was not a JSON-RPC frame.
func (c *FrameChecker) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.bad)
}

// Clip shortens b to 200 bytes for a message.
func Clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}
