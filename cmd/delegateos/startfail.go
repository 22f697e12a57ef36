package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"time"

	"github.com/delegateos/delegateos/proxy"
)

// startFailureWait bounds how long a proxy that cannot start waits for its
// client's first request, to answer it with the reason: an MCP client
// writes its initialize as soon as it has started the proxy (it is in the
// pipe within milliseconds), so only a standard input that is held open
// and silent waits this long, and a script or supervisor holding one
// sees the exit soon after the message.
const startFailureWait = 2 * time.Second

// startFailureMaxLine bounds the line read while waiting: the first
// request is an initialize, far below this.
const startFailureMaxLine = 1 << 20

// answerStartFailure tells the MCP client on in and out why the proxy
// cannot start. A client that sees its server exit only reports that the
// connection closed, while what the proxy said went to a log or a
// terminal nobody watches: so the client's first request (its initialize)
// is answered with a JSON-RPC error carrying msg, and the proxy exits
// after. Notifications before it are skipped; a line that is not a
// message is answered with a null id. Nothing is read from a terminal (a
// person at it has the message on standard error), and nothing but the
// answer is written to out, which carries the protocol.
func answerStartFailure(in io.Reader, out io.Writer, msg string) {
	if in == nil || out == nil || isTerminal(in) {
		return
	}
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		if frame := firstRequest(in, msg); frame != nil {
			_, _ = out.Write(append(frame, '\n'))
		}
	}()
	select {
	case <-answered:
	case <-time.After(startFailureWait):
	}
}

// firstRequest reads client frames until a request, and returns the error
// response to it (nil at the end of the input).
func firstRequest(in io.Reader, msg string) []byte {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 {
			m, rerr := proxy.ReadClientMessage(bytes.TrimRight(line, "\r\n"))
			switch {
			case rerr != nil:
				return proxy.ErrorFrame(nil, proxy.CodeInternalError, msg)
			case m.Kind == proxy.KindRequest:
				return proxy.ErrorFrame(m.ID, proxy.CodeInternalError, msg)
			}
		}
		if err != nil {
			return nil
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
