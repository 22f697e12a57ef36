package proxy

import (
	"bufio"
	"io"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/logline"
)

// BenchmarkCallPinned is BenchmarkCall with the tool pinned (tool_pins),
// as listed: what the pin check adds to each call once the proxy knows the
// current definitions.
func BenchmarkCallPinned(b *testing.B) {
	log := zap.New(logline.NewCore(&discardSink{w: bufio.NewWriterSize(io.Discard, 32<<10)}, zapcore.InfoLevel))
	benchCall(b, pinSession(b, log, io.Discard, io.Discard, echoTool))
}

// BenchmarkPinCheck is the pin check of one tools/call on its own.
func BenchmarkPinCheck(b *testing.B) {
	s := pinSession(b, zap.NewNop(), io.Discard, io.Discard, echoTool)
	req := gate.CallRequest{Method: gate.MethodToolsCall, Tool: "echo"}
	b.ReportAllocs()
	for b.Loop() {
		if why := s.pinCheck(&req); why != "" {
			b.Fatal(why)
		}
	}
}
