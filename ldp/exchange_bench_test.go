package ldp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/delegateos/delegateos/internal/cputime"
)

// handlerTransport sends each request straight to a Handler, in process:
// what a task costs both sides' CPU, without the network.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// benchExec answers as the serve front's echo skill does: the tool's
// content, the cost charged and the delegation, so that each result
// carries a signed attestation of the same shape.
type benchExec struct{}

func (benchExec) Execute(_ context.Context, t *Task) (*Outcome, error) {
	out, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": "hi"},
		{"type": "text", "text": `{"arguments":{"text":"hi"},"params":{"arguments":{"text":"hi"},"name":"echo"}}`}}})
	return &Outcome{Output: out, DelegateOS: &ProvenanceDOS{CostChargedMicrocents: ptr(int64(0))}, DelegationID: "del_000000000001"}, nil
}

// benchSession opens a session of an Ed25519 Client with an Ed25519
// Responder (which attests every result) through handlerTransport.
func benchSession(b *testing.B) (*ClientSession, *Handler) {
	b.Helper()
	resp := &Responder{Exec: benchExec{}, Verifier: &Verifier{}, Key: testKey(1), Card: echoCard("http://delegate.test")}
	resp.Card.Capabilities = append(resp.Card.Capabilities, Capability{Name: "bench"})
	h := &Handler{Responder: resp}
	c := newClient(2)
	c.HTTP = &http.Client{Transport: handlerTransport{h}}
	s, err := c.Open(context.Background(), "http://delegate.test", resp.Card.DelegateID,
		SessionConfig{PreferredPayloadModes: []PayloadMode{ModeText}}, nil, "", testDID(1))
	if err != nil {
		b.Fatal(err)
	}
	return s, h
}

// The three benchmarks report cpu-ns/op (internal/cputime): on a shared
// machine, compare those.

// BenchmarkTaskExchange is one TASK_SUBMIT→TASK_RESULT, both sides in
// process (the initiator signing and checking, the delegate verifying,
// attesting and signing), as make bench-ldp's (c) less the network, the
// gate and the tool.
func BenchmarkTaskExchange(b *testing.B) {
	s, _ := benchSession(b)
	ctx := context.Background()
	b.ReportAllocs()
	defer cputime.Report(b)()
	for i := 0; b.Loop(); i++ {
		r, err := s.Submit(ctx, &TaskSubmit{TaskID: fmt.Sprintf("t%d", i), Skill: "bench", Input: json.RawMessage(`"hi"`)}, "", nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := r.Body.(*TaskResult); !ok {
			b.Fatalf("reply %s", r.Body.Type())
		}
	}
}

// BenchmarkTaskResultCheck is the initiator's part of a task's reply: it
// parses and verifies the TASK_RESULT (envelope, signature, attestation)
// as ClientSession.Submit does.
func BenchmarkTaskResultCheck(b *testing.B) {
	s, h := benchSession(b)
	ctx := context.Background()
	sent := &Envelope{SessionID: s.ID, To: s.Peer, Body: &TaskSubmit{TaskID: "t1", Skill: "bench", Input: json.RawMessage(`"hi"`)}, PayloadMode: ModeText}
	if err := s.c.prepare(sent); err != nil {
		b.Fatal(err)
	}
	body, _ := json.Marshal(sent)
	reply, err := h.Responder.Handle(ctx, body, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	data, _ := json.Marshal(reply)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	defer cputime.Report(b)()
	for b.Loop() {
		// A fresh replay memory: the same reply is checked each time.
		c := *s.c
		c.Verifier = &Verifier{}
		e, err := c.check(ctx, bytes.Clone(data), s.Signer)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := VerifyResult(sent, e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTaskSubmitHandle is the delegate's part: it parses and verifies
// a TASK_SUBMIT, runs the task (benchExec), attests and signs the result
// and writes the reply, as Handler does.
func BenchmarkTaskSubmitHandle(b *testing.B) {
	s, h := benchSession(b)
	ctx := context.Background()
	// The envelopes are signed beforehand, each with its own message ID
	// and nonce (the replay store refuses a second).
	const n = 8192
	bodies := make([][]byte, n)
	for i := range bodies {
		e := &Envelope{SessionID: s.ID, To: s.Peer, Body: &TaskSubmit{TaskID: fmt.Sprintf("t%d", i), Skill: "bench", Input: json.RawMessage(`"hi"`)}, PayloadMode: ModeText}
		if err := s.c.prepare(e); err != nil {
			b.Fatal(err)
		}
		bodies[i], _ = json.Marshal(e)
	}
	b.ReportAllocs()
	defer cputime.Report(b)()
	i := 0
	for b.Loop() {
		if i == n {
			b.StopTimer()
			s, h = benchSession(b)
			for j := range bodies {
				e := &Envelope{SessionID: s.ID, To: s.Peer, Body: &TaskSubmit{TaskID: fmt.Sprintf("t%d", j), Skill: "bench", Input: json.RawMessage(`"hi"`)}, PayloadMode: ModeText}
				if err := s.c.prepare(e); err != nil {
					b.Fatal(err)
				}
				bodies[j], _ = json.Marshal(e)
			}
			i = 0
			b.StartTimer()
		}
		reply, err := h.Responder.Handle(ctx, bodies[i], "", nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := reply.Body.(*TaskResult); !ok {
			b.Fatalf("reply %s", reply.Body)
		}
		if _, err := json.Marshal(reply); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
