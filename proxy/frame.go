package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/delegateos/delegateos/policy"
)

// DefaultMaxFrameBytes is the default limit on one JSON-RPC message.
const DefaultMaxFrameBytes = policy.DefaultMaxFrameBytes

// errFrameTooLarge reports a frame over the limit; prefix holds its start,
// from which the relay can often still read the id.
type errFrameTooLarge struct{ prefix []byte }

func (errFrameTooLarge) Error() string { return "frame exceeds the size limit" }

// frameReader reads newline-delimited frames (the MCP stdio transport) of
// at most max bytes. An oversize frame is consumed to its end and reported,
// and reading can go on.
type frameReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next non-empty frame without its line ending, and the
// same bytes with the line ending as read (for relaying byte for byte).
// Both are valid until the following call.
func (fr *frameReader) next() (frame, raw []byte, err error) {
	for {
		line, err := fr.r.ReadSlice('\n')
		if err == nil && len(fr.buf) == 0 {
			// The common case: the whole frame fits in the buffer.
			if len(line) > fr.max+1 {
				return nil, nil, errFrameTooLarge{prefix: clone(line[:min(len(line), 4096)])}
			}
			if f := trimFrame(line); len(f) > 0 {
				return f, line, nil
			}
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) || err == nil {
			if len(fr.buf)+len(line) > fr.max+1 {
				prefix := fr.buf
				if len(prefix) == 0 {
					prefix = line
				}
				prefix = clone(prefix[:min(len(prefix), 4096)])
				fr.buf = fr.buf[:0]
				if err := fr.discardLine(err == nil); err != nil {
					return nil, nil, err
				}
				return nil, nil, errFrameTooLarge{prefix: prefix}
			}
			fr.buf = append(fr.buf, line...)
			if err == nil {
				raw := clone(fr.buf)
				fr.buf = fr.buf[:0]
				if f := trimFrame(raw); len(f) > 0 {
					return f, raw, nil
				}
			}
			continue
		}
		// EOF or a read error: a final unterminated frame still counts.
		if len(line) > 0 || len(fr.buf) > 0 {
			raw := append(clone(fr.buf), line...)
			fr.buf = fr.buf[:0]
			f := trimFrame(raw)
			if len(f) > fr.max {
				return nil, nil, errFrameTooLarge{prefix: clone(f[:min(len(f), 4096)])}
			}
			if len(f) > 0 {
				return f, raw, nil
			}
		}
		return nil, nil, err
	}
}

// discardLine skips to the end of the current line.
func (fr *frameReader) discardLine(done bool) error {
	for !done {
		_, err := fr.r.ReadSlice('\n')
		switch {
		case err == nil:
			done = true
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			return err
		}
	}
	return nil
}

// trimFrame is bytes.TrimRight(b, "\r\n"), without building the cut set
// for every frame.
func trimFrame(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// idle reports whether nothing read is waiting to be returned, so the next
// call may block.
func (fr *frameReader) idle() bool { return fr.r.Buffered() == 0 && len(fr.buf) == 0 }

// edit replaces frame[from:to] by with.
type edit struct {
	from, to int
	with     []byte
}

// queueEdited queues frame with the edits made (they may come in any
// order but must not overlap), followed by a line ending. The pieces are
// copied straight into the buffer: nothing is allocated.
func (fw *frameWriter) queueEdited(frame []byte, edits []edit) error {
	if len(edits) == 2 && edits[1].from < edits[0].from {
		edits[0], edits[1] = edits[1], edits[0]
	}
	for i := 1; i < len(edits); i++ { // more than two is rare: insertion sort
		for j := i; j > 0 && edits[j].from < edits[j-1].from; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	at := 0
	for _, e := range edits {
		if _, err := fw.b.Write(frame[at:e.from]); err != nil {
			return err
		}
		if _, err := fw.b.Write(e.with); err != nil {
			return err
		}
		at = e.to
	}
	if _, err := fw.b.Write(frame[at:]); err != nil {
		return err
	}
	return fw.b.WriteByte('\n')
}

// frameWriter serializes whole frames onto one stream. Frames the relay
// forwards are queued and flushed when their source has nothing more
// buffered, so a burst of pipelined messages goes out in a few writes and a
// lone message goes out at once; the proxy's own replies are written
// immediately.
type frameWriter struct {
	mu sync.Mutex
	b  *bufio.Writer
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{b: bufio.NewWriterSize(w, 64<<10)}
}

// queue adds one frame; raw carries its line ending unless it was the
// last, unterminated line of its stream.
func (fw *frameWriter) queue(raw []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.add(raw)
}

func (fw *frameWriter) add(raw []byte) error {
	if _, err := fw.b.Write(raw); err != nil {
		return err
	}
	if len(raw) == 0 || raw[len(raw)-1] != '\n' {
		return fw.b.WriteByte('\n')
	}
	return nil
}

// write adds one frame and flushes.
func (fw *frameWriter) write(raw []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if err := fw.add(raw); err != nil {
		return err
	}
	return fw.b.Flush()
}

func (fw *frameWriter) flush() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.b.Flush()
}

// plainASCII reports whether frame is ASCII without a carriage return,
// which is every frame lineSafe passes as it is but for the rare one with raw
// non-ASCII text, in one pass of eight bytes at a time.
func plainASCII(frame []byte) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
		crs   = '\r' * ones
	)
	i := 0
	for ; i+8 <= len(frame); i += 8 {
		w := binary.LittleEndian.Uint64(frame[i:])
		x := w ^ crs // a zero byte where w has '\r'
		if (w|((x-ones)&^x))&highs != 0 {
			return false
		}
	}
	for ; i < len(frame); i++ {
		if c := frame[i]; c >= utf8.RuneSelf || c == '\r' {
			return false
		}
	}
	return true
}

// lineSafe makes a client frame safe for every line reader: a raw U+0085,
// U+2028 or U+2029 inside a JSON string (the MCP TypeScript SDK's
// JSON.stringify writes them raw) is escaped (\u2028), which every JSON
// reader decodes to the same string, so the upstream gets the message the
// gate decides with no character another reader could split a line at.
// It returns the frame (a copy when something was escaped), or why it is
// refused: a carriage return (a line end to Python and to Node's
// readline), invalid UTF-8, or a separator outside a string.
func lineSafe(frame []byte) ([]byte, string) {
	if plainASCII(frame) {
		return frame, ""
	}
	if bytes.IndexByte(frame, '\r') >= 0 {
		return nil, "a carriage return inside a message"
	}
	if !utf8.Valid(frame) {
		return nil, "invalid UTF-8"
	}
	if !hasSeparator(frame) {
		return frame, ""
	}
	out := escapeSeparators(frame)
	if hasSeparator(out) {
		return nil, "a raw line separator (U+0085, U+2028 or U+2029) outside a string; escape it"
	}
	return out, ""
}

func hasSeparator(b []byte) bool {
	return bytes.Contains(b, []byte("\u0085")) || bytes.Contains(b, []byte("\u2028")) || bytes.Contains(b, []byte("\u2029"))
}

// escapeSeparators is frame (valid UTF-8) with each U+0085, U+2028 and
// U+2029 that is a character of a JSON string escaped. The JSON string
// state is followed byte by byte: a quote outside a string opens one, a
// backslash inside one escapes the next byte, and no byte of a multi-byte
// UTF-8 sequence is a quote or a backslash. One the frame has outside a
// string, or right after a backslash, stays: the frame is then no JSON.
func escapeSeparators(frame []byte) []byte {
	out := make([]byte, 0, len(frame)+16)
	in, esc := false, false
	for i := 0; i < len(frame); i++ {
		c := frame[i]
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case in && c == 0xC2 && i+1 < len(frame) && frame[i+1] == 0x85:
			out = append(out, `\u0085`...)
			i++
			continue
		case in && c == 0xE2 && i+2 < len(frame) && frame[i+1] == 0x80 && (frame[i+2] == 0xA8 || frame[i+2] == 0xA9):
			out = append(out, `\u202`...)
			out = append(out, "89"[frame[i+2]-0xA8])
			i += 2
			continue
		}
		out = append(out, c)
	}
	return out
}

// unsafeFrameID is the id of the request a frame lineSafe refuses reads as
// when read strictly, to answer it by; nil when it reads as none.
func unsafeFrameID(frame []byte) []byte {
	h, err := scanClientHeader(frame)
	if err != nil || h.kind != kindRequest {
		return nil
	}
	if _, ok := parseRequestID(h.id); !ok {
		return nil
	}
	return h.id
}
