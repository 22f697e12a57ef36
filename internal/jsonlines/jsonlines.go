// Package jsonlines reads the append-only logs of one JSON object a line
// that delegateos keeps (the spend log, the rate-limit file): line by
// line, bounded, with a torn last line left unread; and it holds them as
// their owners do, one process at a time: the lock beside the log
// (Lock), reading it whole (ReadFile) and its compact rewrite (Rewrite).
package jsonlines

import (
	"bytes"
	"errors"
	"fmt"
)

// Read calls apply for each line of data in order (without its newline)
// and returns the length of the lines it read. What follows the last
// newline is a line torn by a crash during its write, which was never
// acknowledged, so it is not read (and the returned length excludes it).
// A line apply refuses is an error naming the line.
func Read(data []byte, apply func(line []byte) error) (n int, err error) {
	for line := 1; ; line++ {
		end := bytes.IndexByte(data[n:], '\n')
		if end < 0 {
			return n, nil
		}
		if err := apply(data[n : n+end]); err != nil {
			return n, fmt.Errorf("line %d: %w", line, err)
		}
		n += end + 1
	}
}

// Check refuses an empty line and one over maxLen bytes: what every
// parser of such a log checks first.
func Check(line []byte, maxLen int) error {
	switch {
	case len(line) == 0:
		return errors.New("empty line")
	case len(line) > maxLen:
		return fmt.Errorf("%d bytes, over the limit of %d", len(line), maxLen)
	}
	return nil
}
