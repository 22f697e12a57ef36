package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/delegateos/delegateos/gate"
)

// Every allowed call gets one line, once its response is relayed: the
// decision with what the call was charged and how it ended, in order, also
// when the upstream's frames arrive in one burst longer than a log batch.
func TestPumpsLogEveryCall(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	var toClient, toServer bytes.Buffer
	s := testSession(t, zap.New(core), &toClient, &toServer)
	const n = 2*maxBatchedLines + 10
	// The relay numbers the requests it forwards from 1; the client gets
	// each answer under its own id.
	var responses, relayed strings.Builder
	for i := range n {
		s.clientFrame(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, i))
		fmt.Fprintf(&responses, `{"jsonrpc":"2.0","id":%d,"result":{"content":[]}}`+"\n", i+1)
		fmt.Fprintf(&relayed, `{"jsonrpc":"2.0","id":%d,"result":{"content":[]}}`+"\n", i)
	}
	if got := logs.Len(); got != 0 {
		t.Fatalf("%d lines before any response, want none: %v", got, logs.All())
	}
	s.toServer.flush()
	if got := strings.Count(toServer.String(), "\n"); got != n {
		t.Fatalf("%d calls forwarded, want %d", got, n)
	}
	s.fromServer(strings.NewReader(responses.String()))
	if toClient.String() != relayed.String() {
		t.Fatal("the responses were not relayed byte for byte but for their ids")
	}
	lines := logs.FilterMessage("decision").All()
	if len(lines) != n || logs.Len() != n {
		t.Fatalf("%d decision lines of %d, want %d", len(lines), logs.Len(), n)
	}
	for i, e := range lines {
		m := e.ContextMap()
		if m["tool"] != "echo" || m["allowed"] != true || m["reason"] != "granted" || m["cost"] != int64(0) ||
			m["delegation"] != "del_bench" || m["outcome"] != "result" || m["released"] != nil {
			t.Fatalf("line %d: %v", i, m)
		}
		for _, k := range []string{"latency", "upstream_latency"} {
			if _, ok := m[k].(time.Duration); !ok {
				t.Fatalf("line %d has no %s: %v", i, k, m)
			}
		}
	}
	if s.pending.len() != 0 {
		t.Fatalf("%d calls still pending", s.pending.len())
	}
}

// errWriter fails every write.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// A call that cannot be handed to the upstream is answered with an error,
// leaves nothing pending, and its reservation is released, not charged.
func TestCallNotForwarded(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	var toClient bytes.Buffer
	s := testSession(t, zap.New(core), &toClient, errWriter{})
	s.cfg.Gate.Policy.DefaultCost = 25
	s.toServer.queue([]byte("{}"))
	if s.toServer.flush() == nil {
		t.Fatal("the broken upstream accepted a write")
	}
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	s.toClient.flush()
	if !strings.Contains(toClient.String(), `"id":7`) || !strings.Contains(toClient.String(), "not accepting input") {
		t.Fatalf("the client got %q", toClient.String())
	}
	if n := s.pending.len(); n != 0 {
		t.Fatalf("%d calls pending", n)
	}
	lines := logs.FilterMessage("decision").All()
	if len(lines) != 1 {
		t.Fatalf("decision lines: %v", lines)
	}
	if m := lines[0].ContextMap(); m["released"] != true || m["cost"] != int64(0) || m["outcome"] != "not forwarded" || m["allowed"] != true {
		t.Fatalf("the call's line: %v", m)
	}
	scope, err := s.cfg.Gate.Verifier.VerifyChain(s.cfg.SessionToken, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	levels := gate.BudgetLevels(scope)
	if spent := s.cfg.Gate.Budget.Spent(levels[len(levels)-1].Key); spent != 0 {
		t.Fatalf("the unforwarded call was charged %d", spent)
	}
}
