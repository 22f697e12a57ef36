package proxy

import (
	"bufio"
	"io"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/delegateos/delegateos/internal/cputime"
	"github.com/delegateos/delegateos/internal/logline"
)

// benchSession is a session set up as `delegateos proxy --token T --root R`
// runs one (default policy, spend in memory, JSON log lines at info level
// into a buffer), with both directions written to io.Discard, so that a
// benchmark sees the proxy's own work per frame and nothing of the pipes.
func benchSession(tb testing.TB) *session {
	tb.Helper()
	log := zap.New(logline.NewCore(&discardSink{w: bufio.NewWriterSize(io.Discard, 32<<10)}, zapcore.InfoLevel))
	return testSession(tb, log, io.Discard, io.Discard)
}

// discardSink is the CLI's buffered log sink without the file.
type discardSink struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (s *discardSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *discardSink) Sync() error { return nil }

// BenchmarkCall is one tools/call through the relay: the client's frame
// checked, gated and forwarded, the upstream's result settled and relayed,
// with the decision and the settlement logged (log=info, as the CLI logs
// by default, or log=off to see what logging costs). It is the proxy's
// CPU per call without the pipes' system calls, which make bench-proxy
// measures.
func BenchmarkCall(b *testing.B) {
	b.Run("log=info", func(b *testing.B) { benchCall(b, benchSession(b)) })
	b.Run("log=off", func(b *testing.B) {
		s := benchSession(b)
		s.log = zap.NewNop()
		benchCall(b, s)
	})
}

func benchCall(b *testing.B, s *session) {
	var req, resp []byte
	b.ReportAllocs()
	defer cputime.Report(b)()
	for i := 0; b.Loop(); i++ {
		req = append(req[:0], `{"jsonrpc":"2.0","id":`...)
		req = strconv.AppendInt(req, int64(i), 10)
		req = append(req, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, proxy"}}}`...)
		s.clientFrame(req)
		// The upstream answers under the number the relay forwarded with.
		resp = append(resp[:0], `{"jsonrpc":"2.0","id":`...)
		resp = strconv.AppendInt(resp, s.upSeq, 10)
		resp = append(resp, `,"result":{"content":[{"type":"text","text":"hello, proxy"}],"isError":false}}`+"\n"...)
		s.serverFrame(resp[:len(resp)-1], resp)
		s.endServerBatch()
	}
	if n := s.pending.len(); n != 0 {
		b.Fatalf("%d calls still pending", n)
	}
}
