package proxy

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
)

// benchSession is a session set up as `delegateos proxy --token T --root R`
// runs one (default policy, spend in memory, JSON log lines at info level
// into a buffer), with both directions written to io.Discard, so that a
// benchmark sees the proxy's own work per frame and nothing of the pipes.
func benchSession(tb testing.TB) *session {
	tb.Helper()
	root, err := identity.FromSeed(bytes.Repeat([]byte{1}, 32), "root")
	if err != nil {
		tb.Fatal(err)
	}
	agent, err := identity.FromSeed(bytes.Repeat([]byte{2}, 32), "agent")
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	tok, err := dct.Create(dct.CreateParams{
		Issuer: root, Delegatee: agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_bench", DelegationID: "del_bench",
		MaxChainDepth: 1, MaxBudgetMicrocents: 1_000_000_000,
		IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(2 * time.Hour),
	})
	if err != nil {
		tb.Fatal(err)
	}
	pol := policy.Default()
	pol.Roots = []string{root.ID()}
	v, err := dct.NewVerifier(dct.Options{Roots: pol.Roots})
	if err != nil {
		tb.Fatal(err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), &discardSink{w: bufio.NewWriterSize(io.Discard, 32<<10)}, zapcore.InfoLevel))
	return &session{
		cfg: Config{
			Gate:         &Gate{Policy: pol, Verifier: v, Budget: budget.NewMemory()},
			SessionToken: tok.String(), MaxFrameBytes: DefaultMaxFrameBytes,
		},
		log:      log,
		toClient: newFrameWriter(io.Discard),
		toServer: newFrameWriter(io.Discard),
		pending:  newPendingTable(),
	}
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
// with both decision and settlement logged. It is the proxy's CPU per call
// without the pipes' system calls (make bench-proxy measures those).
func BenchmarkCall(b *testing.B) {
	s := benchSession(b)
	var req, resp []byte
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := 0; b.Loop(); i++ {
		req = append(req[:0], `{"jsonrpc":"2.0","id":`...)
		req = strconv.AppendInt(req, int64(i), 10)
		req = append(req, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, proxy"}}}`...)
		resp = append(resp[:0], `{"jsonrpc":"2.0","id":`...)
		resp = strconv.AppendInt(resp, int64(i), 10)
		resp = append(resp, `,"result":{"content":[{"type":"text","text":"hello, proxy"}],"isError":false}}`+"\n"...)
		s.clientFrame(req)
		s.serverFrame(resp[:len(resp)-1], resp)
		s.serverLog.writeTo(s.log)
	}
	if n := s.pending.len(); n != 0 {
		b.Fatalf("%d calls still pending", n)
	}
}

func BenchmarkTmpLog(b *testing.B) {
	s := benchSession(b)
	b.ReportAllocs()
	for b.Loop() {
		s.log.Info("decision", zap.String("tool", "echo"), zap.Bool("allowed", true), zap.String("reason", "granted"),
			zap.String("delegation", "del_bench"), zap.Int64("cost", 0), zap.Duration("latency", 1234*time.Nanosecond))
		s.log.Info("call settled", zap.String("tool", "echo"), zap.Duration("upstream_latency", 51234*time.Nanosecond), zap.Int64("cost", 0), zap.String("delegation", "del_bench"))
	}
}
