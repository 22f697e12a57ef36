package mcptest

import "time"

// NextLine returns the next frame the process writes, byte for byte
// without its line ending, waiting up to CallTimeout.
func (c *Raw) NextLine() []byte {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the process closed its stdout")
		}
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		return line
	case <-time.After(CallTimeout):
		c.t.Fatalf("no frame from the process within %s", CallTimeout)
	}
	return nil
}
