package chain

import (
	"bytes"
	"fmt"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// encodeEvent returns e as one log line: its canonical JSON and a newline.
func encodeEvent(e *event) ([]byte, error) {
	b, err := canon.Marshal(e)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxLineLen {
		return nil, malformed("the event is %d bytes, over the line limit of %d", len(b), MaxLineLen)
	}
	return append(b, '\n'), nil
}

// decodeLine reads one log line, without its newline. It must decode
// strictly (no unknown, repeated or re-cased members, valid UTF-8) and be
// exactly the canonical encoding of what it decodes to, so that a line has
// one reading. What the event says is checked when it is replayed.
func decodeLine(line []byte) (*event, error) {
	if len(line) > MaxLineLen {
		return nil, malformed("the line is %d bytes, over the limit of %d", len(line), MaxLineLen)
	}
	var e event
	if err := strictjson.Unmarshal(line, &e); err != nil {
		return nil, malformed("%v", err)
	}
	b, err := canon.Marshal(&e)
	if err != nil {
		return nil, malformed("%v", err)
	}
	if !bytes.Equal(b, line) {
		return nil, malformed("the line is not in canonical form (RFC 8785)")
	}
	return &e, nil
}

// parseLog replays each complete line of data in order and returns the
// length of the lines it read. What follows the last newline is a line torn
// by a crash during its append, whose call never returned: it is not read,
// and not counted in n. A line that does not decode or replay is an error
// naming it (lines are numbered from firstLine).
func parseLog(data []byte, firstLine int, replay func(*event) error) (n int, err error) {
	for line := firstLine; ; line++ {
		end := bytes.IndexByte(data[n:], '\n')
		if end < 0 {
			if len(data)-n > MaxLineLen {
				return n, fmt.Errorf("line %d: %w", line, malformed("an unterminated line of %d bytes is longer than any append", len(data)-n))
			}
			return n, nil
		}
		e, err := decodeLine(data[n : n+end])
		if err == nil {
			err = replay(e)
		}
		if err != nil {
			return n, fmt.Errorf("line %d: %w", line, err)
		}
		n += end + 1
	}
}
