package proxy

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"time"

	"github.com/delegateos/delegateos/gate"
)

// startFailureWait bounds how long a proxy that cannot start waits for
// each of its client's requests, to answer it with the reason: an MCP
// client writes its first request as soon as it has started the proxy, and
// the next as soon as the answer comes, so only a standard input that is
// held open and silent waits this long. (It is
// shorter than the tests' wait for a process to exit, mcptest.WaitTimeout,
// so that a test that holds the input open still sees the exit.)
const startFailureWait = 3 * time.Second

// startFailureMaxLine bounds the line read while waiting: the first
// request is an initialize, far below this.
const startFailureMaxLine = 1 << 20

// maxStartFailureAnswers bounds the requests a proxy that cannot start
// answers: a client may probe (server/discover) before it initializes.
const maxStartFailureAnswers = 8

// AnswerStartFailure tells the MCP client on in and out why the proxy
// cannot start. A client that sees its server exit only reports that the
// connection closed, while what the proxy said went to a log or a
// terminal nobody watches: so the client's requests are answered with a
// JSON-RPC error carrying msg until it has been told in answer to its
// initialize (a client of MCP 2026-07-28 asks server/discover first, and
// on an error falls back to initialize), its input ends, it sends nothing
// for startFailureWait, or maxStartFailureAnswers were answered; then the
// proxy exits. Notifications are skipped; a line that is not a message is
// answered with a null id. Nothing is read from a terminal (a person at it
// has the message on standard error), and nothing but the answers is
// written to out, which carries the protocol.
func AnswerStartFailure(in io.Reader, out io.Writer, msg string) {
	if in == nil || out == nil || isTerminal(in) {
		return
	}
	answered := make(chan bool) // true: that was the last
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for n := 1; ; n++ {
			frame, initialize := nextRequest(r, msg)
			if frame == nil {
				answered <- true
				return
			}
			_, err := out.Write(append(frame, '\n'))
			last := initialize || err != nil || n == maxStartFailureAnswers
			answered <- last
			if last {
				return
			}
		}
	}()
	for {
		select {
		case last := <-answered:
			if last {
				return
			}
		case <-time.After(startFailureWait):
			return
		}
	}
}

// nextRequest reads client frames until a request, and returns the error
// response to it, and whether it was an initialize (nil at the end of the
// input).
func nextRequest(r *bufio.Reader, msg string) (answer []byte, initialize bool) {
	for {
		line, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 {
			m, rerr := ReadClientMessage(bytes.TrimRight(line, "\r\n"))
			switch {
			case rerr != nil:
				return ErrorFrame(nil, gate.CodeInternalError, msg), false
			case m.Kind == KindRequest:
				return ErrorFrame(m.ID, gate.CodeInternalError, msg), m.Method == "initialize"
			}
		}
		if err != nil {
			return nil, false
		}
	}
}

// readLine reads one line of at most startFailureMaxLine bytes; a longer
// one is read to its end and returned as "\x00", which is no message.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	long := false
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > startFailureMaxLine {
			long = true
		}
		if !long {
			line = append(line, chunk...)
		}
		if err != bufio.ErrBufferFull {
			if long {
				return []byte{0}, err
			}
			return line, err
		}
	}
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
