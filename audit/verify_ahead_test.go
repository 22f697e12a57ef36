package audit

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// countingReader counts the reads of the log, and the reads under way.
type countingReader struct {
	r             io.Reader
	reads, inside atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.inside.Add(1)
	defer c.inside.Add(-1)
	c.reads.Add(1)
	return c.r.Read(p)
}

// Verify reads and parses batches ahead of its checks, but once it has
// returned, on the first line or at the end, nothing reads the log any
// more: the reading goroutine has ended with it.
func TestVerifyReadsNothingAfterItReturns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLog(t, path, 3000, treeOptions)
	log, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	broken := append([]byte("not a receipt\n"), log...)
	for _, c := range []struct {
		name string
		data []byte
		ok   bool
	}{{"a bad first line", broken, false}, {"a whole log", log, true}} {
		r := &countingReader{r: bytes.NewReader(c.data)}
		_, err := Verify(r, VerifyOptions{Trusted: []string{testSigner(t, 1).DID()}})
		var p *Problem
		if c.ok != (err == nil) || (!c.ok && (!errors.As(err, &p) || p.Line != 1)) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n := r.inside.Load(); n != 0 {
			t.Errorf("%s: %d reads under way after Verify returned", c.name, n)
		}
		// The reader verify used has stopped, not merely been told to.
		lr := newParsingReader(&countingReader{r: bytes.NewReader(c.data)})
		if lr.line() == nil {
			t.Fatal("no line")
		}
		lr.stop()
		select {
		case <-lr.finished:
		default:
			t.Errorf("%s: the reading goroutine runs on after stop", c.name)
		}
	}
}
