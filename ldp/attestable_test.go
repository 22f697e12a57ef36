package ldp

import (
	"crypto/ed25519"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/delegateos/delegateos/identity"
)

// TestAttestableTasks: a task can be attested in its own session only,
// once it ended, once (a release makes it attestable again); a session
// keeps its last MaxAttestableTasks tasks.
func TestAttestableTasks(t *testing.T) {
	var a attestable
	live := func(string) bool { return true }
	code := func(sid, task string) string {
		_, le := a.claim(sid, task, nil)
		if le == nil {
			return ""
		}
		return le.Code
	}
	if c := code("s1", "t"); c != CodeAttestationTask {
		t.Fatalf("unknown task: %q", c)
	}
	a.set("s1", "t", taskRunning, nil, 10, live)
	if c := code("s1", "t"); c != CodeAttestationUnfinished {
		t.Fatalf("running: %q", c)
	}
	a.set("s1", "t", taskEnded, nil, 10, live)
	if c := code("s2", "t"); c != CodeAttestationTask {
		t.Fatalf("another session: %q", c)
	}
	release, le := a.claim("s1", "t", nil)
	if le != nil {
		t.Fatal(le)
	}
	if c := code("s1", "t"); c != CodeAttestationRepeated {
		t.Fatalf("again: %q", c)
	}
	// Running the same task ID again does not make it attestable again.
	a.set("s1", "t", taskRunning, nil, 10, live)
	a.set("s1", "t", taskEnded, nil, 10, live)
	if c := code("s1", "t"); c != CodeAttestationRepeated {
		t.Fatalf("rerun: %q", c)
	}
	release()
	if c := code("s1", "t"); c != "" {
		t.Fatalf("released: %q", c)
	}
	for i := range MaxAttestableTasks + 1 {
		a.set("s3", strconv.Itoa(i), taskEnded, nil, 10, live)
	}
	if c := code("s3", "0"); c != CodeAttestationTask {
		t.Fatalf("the oldest task kept: %q", c)
	}
	if c := code("s3", strconv.Itoa(MaxAttestableTasks)); c != "" {
		t.Fatalf("the newest task: %q", c)
	}
	// A refused task is not attestable (rtldp3 #4).
	a.set("s4", "r", taskRunning, nil, 10, live)
	a.set("s4", "r", taskRefused, []string{}, 10, live)
	if c := code("s4", "r"); c != CodeAttestationRefusedTask {
		t.Fatalf("refused task: %q", c)
	}
	// Nor one whose token's chain names this delegate (rtldp3 #3).
	self := testKey(7).Public().(ed25519.PublicKey)
	other := testKey(8).Public().(ed25519.PublicKey)
	a.set("s4", "mine", taskEnded, []string{identity.DIDFromPublicKey(other), identity.DIDFromPublicKey(self), "not a principal"}, 10, live)
	if _, le := a.claim("s4", "mine", self); le == nil || le.Code != CodeAttestationRefused {
		t.Fatalf("self-dealing: %+v", le)
	}
	if _, le := a.claim("s4", "mine", testKey(9).Public().(ed25519.PublicKey)); le != nil {
		t.Fatalf("another delegate: %+v", le)
	}
	// Sessions no longer held are swept once the table is full.
	for i := range 20 {
		a.set("gone-"+strconv.Itoa(i), "t", taskEnded, nil, 10, func(id string) bool { return id == "s1" })
	}
	if n := len(a.m); n > 11 {
		t.Fatalf("%d sessions kept, at most 11", n)
	}
}

// TestAttestUnfinishedTask: through a Responder, a task still running
// cannot be attested; once it ends cancelled by its initiator, it did no
// work to rate (ATTESTATION_TASK_REFUSED).
func TestAttestUnfinishedTask(t *testing.T) {
	d := newDelegate(t, 1, "")
	c := newClient(2)
	s, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Submit(ctx, &TaskSubmit{TaskID: "task-001", Skill: "slow", Input: json.RawMessage(`"x"`)}, ModeText, nil, nil)
	}()
	<-d.exec.started
	reply, err := s.Send(ctx, &Attestation{Claim: json.RawMessage(`{}`), Evidence: json.RawMessage(`{}`)})
	if f, ok := reply.Body.(*TaskFailed); err != nil || !ok || f.Error.Code != CodeAttestationUnfinished {
		t.Fatalf("running: %v %+v", err, reply)
	}
	if _, err := s.Send(ctx, &TaskCancel{TaskID: "task-001"}); err != nil {
		t.Fatal(err)
	}
	<-done
	reply, err = s.Send(ctx, &Attestation{Claim: json.RawMessage(`{}`), Evidence: json.RawMessage(`{}`)})
	if f, ok := reply.Body.(*TaskFailed); err != nil || !ok || f.Error.Code != CodeAttestationRefusedTask {
		t.Fatalf("cancelled: %v %+v", err, reply)
	}
}
