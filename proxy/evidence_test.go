package proxy

import (
	"bytes"
	"crypto/sha256"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/receipt"
)

// recordingEvidence keeps what the relay hands over.
type recordingEvidence struct {
	decisions  []*receipt.Decision
	executions []*receipt.Execution
	failed     bool
}

func (r *recordingEvidence) Decided(d *receipt.Decision)   { r.decisions = append(r.decisions, d) }
func (r *recordingEvidence) Executed(e *receipt.Execution) { r.executions = append(r.executions, e) }
func (r *recordingEvidence) Failed() bool                  { return r.failed }
func (r *recordingEvidence) Approval(*receipt.HumanApprovalBody) (string, error) {
	return "", nil
}

// The relay hands over each decision with the hash of the request as the
// client sent it, and each execution with the hashes of the request as
// forwarded and the response as returned.
func TestEvidenceHandedOver(t *testing.T) {
	var toClient, toServer bytes.Buffer
	s := testSession(t, zap.NewNop(), &toClient, &toServer)
	ev := &recordingEvidence{}
	s.cfg.Evidence = ev
	req := `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_delegateos":{}}}`
	s.clientFrame([]byte(req))
	s.toServer.flush()
	forwarded := strings.TrimSuffix(toServer.String(), "\n")
	resp := `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
	s.serverFrame([]byte(resp), []byte(resp+"\n"))
	s.toClient.flush()
	s.endServerBatch() // as the server's pump does once the client has its responses
	returned := strings.TrimSuffix(toClient.String(), "\n")
	if len(ev.decisions) != 1 || len(ev.executions) != 1 {
		t.Fatalf("%d decisions, %d executions", len(ev.decisions), len(ev.executions))
	}
	d, e := ev.decisions[0], ev.executions[0]
	if !d.Allowed || d.Payload != sha256.Sum256([]byte(req)) || d.ArgumentsHash != sha256.Sum256([]byte(`{"text":"x"}`)) || d.Token == "" {
		t.Errorf("decision %+v", d)
	}
	if e.Decision != d || e.Request != sha256.Sum256([]byte(forwarded)) || !e.HasResponse || e.Response != sha256.Sum256([]byte(returned)) || e.Outcome != outcomeResult {
		t.Errorf("execution %+v; forwarded %s returned %s", e, forwarded, returned)
	}
	if strings.Contains(forwarded, "_delegateos") || !strings.Contains(returned, `"id":"a"`) {
		t.Fatalf("forwarded %s returned %s", forwarded, returned)
	}
}

// Once receipts cannot be kept, every gated request is refused.
func TestEvidenceFailedRefuses(t *testing.T) {
	var toClient, toServer bytes.Buffer
	s := testSession(t, zap.NewNop(), &toClient, &toServer)
	s.cfg.Evidence = &recordingEvidence{failed: true}
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///a"}}`))
	s.toServer.flush()
	if toServer.Len() != 0 {
		t.Fatalf("forwarded %s", toServer.String())
	}
	if got := strings.Count(toClient.String(), `"type":"evidence_unavailable"`); got != 2 {
		t.Fatalf("answers: %s", toClient.String())
	}
}

// In observe mode a refused request is forwarded: its decision receipt
// says BLOCK and not enforced, and it gets no execution receipt (it is
// charged nothing).
func TestEvidenceObserveMode(t *testing.T) {
	var toClient, toServer bytes.Buffer
	s := testSession(t, zap.NewNop(), &toClient, &toServer)
	s.cfg.Observe = true
	ev := &recordingEvidence{}
	s.cfg.Evidence = ev
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{}}}`))
	s.toServer.flush()
	if !strings.Contains(toServer.String(), "write_file") {
		t.Fatalf("observe mode did not forward: %s", toServer.String())
	}
	resp := `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
	s.serverFrame([]byte(resp), []byte(resp+"\n"))
	if len(ev.decisions) != 1 || ev.decisions[0].Allowed || ev.decisions[0].Enforced || ev.decisions[0].DenialType == "" {
		t.Fatalf("decisions %+v", ev.decisions)
	}
	if len(ev.executions) != 0 {
		t.Fatalf("an execution receipt for a call observe mode forwarded: %+v", ev.executions[0])
	}
}

// The server's pump hands the execution records of a batch of responses
// over when the batch ends, after the client has the responses, in the
// order it settled them; each execution's decision was handed over
// before it (before its call was forwarded). Nothing is lost or handed
// twice, and an execution settled elsewhere (the client's pump, here a
// cancellation) is handed over at once.
func TestEvidenceExecutionsPerBatch(t *testing.T) {
	var toClient, toServer bytes.Buffer
	s := testSession(t, zap.NewNop(), &toClient, &toServer)
	ev := &recordingEvidence{}
	s.cfg.Evidence = ev
	const n = 5
	for i := 0; i < n+1; i++ {
		s.clientFrame([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(100+i) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`))
	}
	if len(ev.decisions) != n+1 || len(ev.executions) != 0 {
		t.Fatalf("%d decisions, %d executions before any answer", len(ev.decisions), len(ev.executions))
	}
	// The last call is cancelled: settled by the client's pump, its
	// execution is handed over at once.
	s.clientFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + strconv.Itoa(100+n) + `}}`))
	if len(ev.executions) != 1 || ev.executions[0].Decision != ev.decisions[n] || ev.executions[0].Outcome != outcomeCancelled {
		t.Fatalf("the cancellation's execution was not handed over at once: %d executions", len(ev.executions))
	}
	// Answered in reverse order, in one batch.
	for i := n; i >= 1; i-- {
		resp := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":{"content":[]}}`
		s.serverFrame([]byte(resp), []byte(resp+"\n"))
		if len(ev.executions) != 1 {
			t.Fatalf("an execution was handed over before its batch ended (%d)", len(ev.executions))
		}
	}
	s.toClient.flush()
	s.endServerBatch()
	if len(ev.executions) != n+1 {
		t.Fatalf("%d executions after the batch, want %d", len(ev.executions), n+1)
	}
	for k, e := range ev.executions[1:] {
		if want := ev.decisions[n-1-k]; e.Decision != want || e.Outcome != outcomeResult {
			t.Fatalf("execution %d is for another decision or outcome (%s)", k, e.Outcome)
		}
	}
	if len(s.serverExec) != 0 {
		t.Fatal("the batch still holds executions")
	}
	s.endServerBatch()
	if len(ev.executions) != n+1 {
		t.Fatal("an execution was handed over twice")
	}
}
