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
)

// Every call gets its decision line when it is forwarded and its
// settlement line once its response is relayed, in order, also when the
// upstream's frames arrive in one burst longer than a log batch.
func TestPumpsLogEveryCall(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	var toClient, toServer bytes.Buffer
	s := testSession(t, zap.New(core), &toClient, &toServer)
	const n = 2*maxBatchedLines + 10
	var responses strings.Builder
	for i := range n {
		s.clientFrame(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, i))
		fmt.Fprintf(&responses, `{"jsonrpc":"2.0","id":%d,"result":{"content":[]}}`+"\n", i)
	}
	if got := logs.FilterMessage("decision").Len(); got != n {
		t.Fatalf("%d decision lines before any response, want %d", got, n)
	}
	if logs.FilterMessage("call settled").Len() != 0 {
		t.Fatal("a call was settled before its response")
	}
	s.toServer.flush()
	if got := strings.Count(toServer.String(), "\n"); got != n {
		t.Fatalf("%d calls forwarded, want %d", got, n)
	}
	s.fromServer(strings.NewReader(responses.String()))
	if toClient.String() != responses.String() {
		t.Fatal("the responses were not relayed byte for byte")
	}
	settled := logs.FilterMessage("call settled").All()
	if len(settled) != n {
		t.Fatalf("%d settlement lines, want %d", len(settled), n)
	}
	for i, e := range settled {
		m := e.ContextMap()
		if m["tool"] != "echo" || m["cost"] != int64(0) || m["delegation"] != "del_bench" || m["released"] != nil {
			t.Fatalf("settlement %d: %v", i, m)
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
	settled := logs.FilterMessage("call settled").All()
	if len(settled) != 1 || settled[0].ContextMap()["released"] != true {
		t.Fatalf("settlement lines: %v", settled)
	}
	scope, err := s.cfg.Gate.Verifier.VerifyChain(s.cfg.SessionToken, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	levels := budgetLevels(scope)
	if spent := s.cfg.Gate.Budget.Spent(levels[len(levels)-1].Key); spent != 0 {
		t.Fatalf("the unforwarded call was charged %d", spent)
	}
}
