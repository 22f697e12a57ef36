package ldp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoExec is a test Executor: "echo" returns its input, "stream" sends an
// update first, "slow" runs until cancelled (saying when it started).
type echoExec struct {
	mu       sync.Mutex
	tokens   []*DelegateOSMember
	started  chan struct{}
	attested []string
}

func (x *echoExec) Execute(ctx context.Context, t *Task) (*Outcome, error) {
	x.mu.Lock()
	x.tokens = append(x.tokens, t.Token)
	x.mu.Unlock()
	switch t.Submit.Skill {
	case "stream":
		t.Update(ptr(0.5), "halfway")
	case "slow":
		close(x.started)
		<-ctx.Done()
		return nil, ctx.Err()
	case "deny":
		return nil, &TaskError{LdpError: LdpError{Code: "capability_not_granted", Category: "policy", Severity: "error", Message: "the token does not grant this"}}
	}
	out, _ := json.Marshal(map[string]json.RawMessage{"echo": t.Submit.Input})
	return &Outcome{Output: out, Confidence: ptr(0.9)}, nil
}

func (x *echoExec) Attest(_ context.Context, s Session, e *Envelope, by Verified, claim func(string) (func(), *LdpError)) error {
	if _, le := claim("task-001"); le != nil {
		return &TaskError{LdpError: *le}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.attested = append(x.attested, string(e.Body.(*Attestation).Claim))
	return nil
}

func echoCard(endpoint string) *IdentityCard {
	return &IdentityCard{
		DelegateID: "ldp:delegate:echo", Name: "Echo", ModelFamily: "none", ModelVersion: "echo-1",
		TrustDomain:           TrustDomain{Name: "research.internal", AllowCrossDomain: true, TrustedPeers: []string{"partner.corp"}},
		ContextWindow:         4096,
		Capabilities:          []Capability{{Name: "echo", QualityHint: ptr(0.9)}, {Name: "stream"}, {Name: "slow"}, {Name: "deny"}},
		SupportedPayloadModes: []PayloadMode{ModeSemanticFrame, ModeText},
		Endpoint:              endpoint,
	}
}

type delegate struct {
	srv  *httptest.Server
	resp *Responder
	exec *echoExec
}

func newDelegate(t *testing.T, key byte, secret string) *delegate {
	t.Helper()
	d := &delegate{exec: &echoExec{started: make(chan struct{})}}
	d.resp = &Responder{Exec: d.exec, Verifier: &Verifier{HMACSecret: secret}}
	if key != 0 {
		d.resp.Key = testKey(key)
	}
	d.srv = httptest.NewServer(&Handler{Responder: d.resp})
	t.Cleanup(d.srv.Close)
	d.resp.Card = echoCard(d.srv.URL)
	if err := d.resp.Card.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}

func newClient(key byte) *Client {
	c := &Client{ID: "ldp:delegate:router", TrustDomain: "research.internal", Verifier: &Verifier{}}
	if key != 0 {
		c.Key = testKey(key)
	}
	return c
}

var frame = json.RawMessage(`{"task_type":"analysis","instruction":"Compare","expected_output_format":"structured_analysis"}`)

// TestSessionFlowEd25519 runs the whole §5 lifecycle between a Client and a
// Responder over loopback HTTP, both signing with Ed25519 and checking the
// other: discovery, HELLO, SESSION_PROPOSE, tasks in semantic_frame, a frame
// that fails validation and the fallback to text (§4.2's flow), a streamed
// task, a cancelled task, an attestation and SESSION_CLOSE.
func TestSessionFlowEd25519(t *testing.T) {
	d := newDelegate(t, 1, "")
	c := newClient(2)
	card, err := c.Discover(ctx, d.srv.URL)
	if err != nil || card.DelegateID != "ldp:delegate:echo" {
		t.Fatalf("discover: %v", err)
	}
	s, err := c.Open(ctx, d.srv.URL, card.DelegateID, SessionConfig{
		PreferredPayloadModes: []PayloadMode{ModeSemanticGraph, ModeSemanticFrame, ModeText}, TTLSecs: ptr(uint64(600))}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Payload.Mode != ModeSemanticFrame || len(s.Payload.Fallback) != 1 || s.Signer != testDID(1) {
		t.Fatalf("session %+v", s)
	}
	reply, err := s.Submit(ctx, &TaskSubmit{TaskID: "task-001", Skill: "echo", Input: frame}, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := reply.Body.(*TaskResult)
	p := res.Provenance
	if p.ProducedBy != "ldp:delegate:echo" || p.ModelVersion != "echo-1" || p.PayloadModeUsed != ModeSemanticFrame ||
		p.SessionID != s.ID || p.Verified || p.VerificationStatus != "unverified" || *p.Confidence != 0.9 || reply.Provenance == nil {
		t.Fatalf("provenance %+v", p)
	}
	if !strings.Contains(string(res.Output), `"instruction":"Compare"`) {
		t.Fatalf("output %s", res.Output)
	}

	// A frame without its required fields fails; the session falls back
	// to text and stays open, and the task is submitted again in text.
	reply, err = s.Submit(ctx, &TaskSubmit{TaskID: "task-002", Skill: "echo", Input: json.RawMessage(`{"task_type":"analysis"}`)}, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := reply.Body.(*TaskFailed); !ok || f.Error.Code != CodeFrameInvalid || !strings.Contains(f.Error.Message, "semantic_frame validation failed") || !f.Error.Retryable {
		t.Fatalf("bad frame: %+v", reply.Body)
	}
	if s.Payload.Mode != ModeText {
		t.Fatalf("client did not fall back: %+v", s.Payload)
	}
	reply, err = s.Submit(ctx, &TaskSubmit{TaskID: "task-002", Skill: "echo", Input: json.RawMessage(`"Compare"`)}, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := reply.Body.(*TaskResult); !ok || r.Provenance.PayloadModeUsed != ModeText {
		t.Fatalf("text resubmission: %+v", reply.Body)
	}
	reply, _ = s.Submit(ctx, &TaskSubmit{TaskID: "task-003", Skill: "echo", Input: frame}, ModeSemanticFrame, nil, nil)
	if f, ok := reply.Body.(*TaskFailed); !ok || f.Error.Code != CodePayloadMode {
		t.Fatalf("frame after fallback: %+v", reply.Body)
	}
	reply, _ = s.Submit(ctx, &TaskSubmit{TaskID: "task-004", Skill: "translate", Input: frame}, "", nil, nil)
	if f, ok := reply.Body.(*TaskFailed); !ok || f.Error.Code != CodeSkillUnknown {
		t.Fatalf("unknown skill: %+v", reply.Body)
	}
	reply, _ = s.Submit(ctx, &TaskSubmit{TaskID: "task-005", Skill: "deny", Input: frame}, "", nil, nil)
	if f, ok := reply.Body.(*TaskFailed); !ok || f.Error.Code != "capability_not_granted" || f.Error.Message != "the token does not grant this" {
		t.Fatalf("denied: %+v", reply.Body)
	}

	// Streamed: the update arrives, signed and checked, before the result.
	var updates []*Envelope
	reply, err = s.Submit(ctx, &TaskSubmit{TaskID: "task-006", Skill: "stream", Input: json.RawMessage(`"x"`)}, "", nil,
		func(e *Envelope) { updates = append(updates, e) })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reply.Body.(*TaskResult); !ok || len(updates) != 1 || *updates[0].Body.(*TaskUpdate).Message != "halfway" || updates[0].Signer != testDID(1) {
		t.Fatalf("stream: %+v %d updates", reply.Body, len(updates))
	}

	// Cancelled: TASK_CANCEL stops the running task.
	done := make(chan *Envelope)
	go func() {
		r, _ := s.Submit(ctx, &TaskSubmit{TaskID: "task-007", Skill: "slow", Input: json.RawMessage(`"x"`)}, "", nil, nil)
		done <- r
	}()
	<-d.exec.started
	reply, err = s.Send(ctx, &TaskCancel{TaskID: "task-007"})
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := reply.Body.(*TaskUpdate); !ok || *u.Message != "cancelled" {
		t.Fatalf("cancel: %+v", reply.Body)
	}
	if f, ok := (<-done).Body.(*TaskFailed); !ok || f.Error.Code != "TASK_CANCELLED" {
		t.Fatalf("cancelled task: %+v", f)
	}
	reply, _ = s.Send(ctx, &TaskCancel{TaskID: "task-007"})
	if f, ok := reply.Body.(*TaskFailed); !ok || f.Error.Code != CodeTaskUnknown {
		t.Fatalf("cancel a finished task: %+v", reply.Body)
	}

	// An attestation is taken without a reply.
	if reply, err = s.Send(ctx, &Attestation{Claim: json.RawMessage(`{"quality":0.9}`), Evidence: json.RawMessage(`["task-001"]`)}); err != nil || reply != nil {
		t.Fatalf("attestation: %v %+v", err, reply)
	}
	if len(d.exec.attested) != 1 {
		t.Fatal("the attestation did not reach the Attester")
	}

	if err := s.Close(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	reply, _ = s.Submit(ctx, &TaskSubmit{TaskID: "task-008", Skill: "echo", Input: json.RawMessage(`"x"`)}, "", nil, nil)
	if f, ok := reply.Body.(*TaskFailed); !ok || f.Error.Code != CodeSessionClosed {
		t.Fatalf("after close: %+v", reply.Body)
	}
}

// TestSessionFlowHMAC: a peer that signs with the reference's HMAC gets
// HMAC-signed replies; one without the secret is refused.
func TestSessionFlowHMAC(t *testing.T) {
	d := newDelegate(t, 0, "shared")
	c := &Client{ID: "ldp:delegate:router", TrustDomain: "research.internal", HMACSecret: "shared", Verifier: &Verifier{HMACSecret: "shared"}}
	s, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := s.Submit(ctx, &TaskSubmit{TaskID: "t", Skill: "echo", Input: frame}, "", nil, nil)
	if err != nil || reply.SignatureAlgorithm != AlgHMACSHA256 {
		t.Fatalf("%v %+v", err, reply)
	}
	other := &Client{ID: "ldp:delegate:router", TrustDomain: "research.internal", HMACSecret: "guess"}
	if _, err := other.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", ""); err == nil || !strings.Contains(err.Error(), string(ReasonTampered)) {
		t.Fatalf("another secret: %v", err)
	}
}

// TestResponderRefusals: unsigned, replayed, another key within the
// session, misaddressed, untrusted domains.
func TestResponderRefusals(t *testing.T) {
	d := newDelegate(t, 1, "")
	code := func(e *Envelope) string {
		t.Helper()
		switch b := e.Body.(type) {
		case *TaskFailed:
			return b.Error.Code
		case *SessionReject:
			return b.Error.Code
		}
		t.Fatalf("reply %s", e.Body.Type())
		return ""
	}
	unsigned := &Client{ID: "ldp:delegate:router", TrustDomain: "research.internal"}
	hello := func() *Envelope {
		return &Envelope{To: "ldp:delegate:echo", Body: &Hello{DelegateID: "ldp:delegate:router"}, PayloadMode: ModeText}
	}
	reply, err := unsigned.Send(ctx, d.srv.URL, hello(), "", "")
	if err != nil || code(reply) != string(ReasonUnsigned) {
		t.Fatalf("unsigned: %v", err)
	}

	// The same signed SESSION_PROPOSE twice: the second is a replay. A
	// HELLO replayed is answered again: it changes nothing, so it takes
	// no place in the replay store.
	c := newClient(2)
	for _, body := range []Body{&SessionPropose{Config: SessionConfig{TrustDomain: "research.internal"}}, &Hello{DelegateID: "ldp:delegate:router"}} {
		e := &Envelope{To: "ldp:delegate:echo", Body: body, PayloadMode: ModeText}
		if err := c.prepare(e); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(e)
		first, err := d.resp.Handle(ctx, raw, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		second, err := d.resp.Handle(ctx, raw, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		switch body.(type) {
		case *SessionPropose:
			if _, ok := first.Body.(*SessionAccept); !ok || code(second) != string(ReasonReplayed) {
				t.Fatalf("propose twice: %s, %s", first.Body.Type(), second.Body.Type())
			}
		case *Hello:
			if _, ok := second.Body.(*CapabilityManifest); !ok {
				t.Fatalf("hello twice: %s", second.Body.Type())
			}
		}
	}

	// A session opened with key 2 takes no task signed by key 3, even
	// from the same delegate ID.
	s, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	intruder := newClient(3)
	sub := &Envelope{SessionID: s.ID, To: "ldp:delegate:echo", Body: &TaskSubmit{TaskID: "t", Skill: "echo", Input: frame}, PayloadMode: ModeSemanticFrame}
	reply, err = intruder.Send(ctx, d.srv.URL, sub, "", "")
	if err != nil || code(reply) != string(ReasonWrongKey) {
		t.Fatalf("another key: %v %+v", err, reply.Body)
	}
	// Another delegate ID cannot use the session at all.
	other := &Client{ID: "ldp:delegate:other", Key: testKey(3)}
	sub = &Envelope{SessionID: s.ID, To: "ldp:delegate:echo", Body: &TaskSubmit{TaskID: "t", Skill: "echo", Input: frame}, PayloadMode: ModeSemanticFrame}
	reply, _ = other.Send(ctx, d.srv.URL, sub, "", "")
	if code(reply) != CodeSessionUnknown {
		t.Fatalf("another peer: %+v", reply.Body)
	}

	e := hello()
	e.To = "ldp:delegate:someone-else"
	reply, _ = c.Send(ctx, d.srv.URL, e, "", "")
	if code(reply) != CodeMisaddressed {
		t.Fatalf("misaddressed: %+v", reply.Body)
	}
	for _, tc := range []struct {
		cfg  SessionConfig
		want string
	}{
		{SessionConfig{RequiredTrustDomain: "finance.internal"}, CodeTrustDomainMismatch},
		{SessionConfig{TrustDomain: "stranger.org"}, CodeUntrustedPeer},
	} {
		cl := newClient(2)
		cl.TrustDomain = ""
		_, err := cl.Open(ctx, d.srv.URL, "ldp:delegate:echo", tc.cfg, nil, "", "")
		var rej *SessionRejected
		if !errors.As(err, &rej) || rej.Reject.Error.Code != tc.want {
			t.Fatalf("%+v: %v", tc.cfg, err)
		}
	}
	partner := newClient(4)
	partner.TrustDomain = "partner.corp"
	if _, err := partner.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", ""); err != nil {
		t.Fatalf("trusted peer domain: %v", err)
	}
}

// TestTaskToken: the TASK_SUBMIT's delegateos member wins over the
// SESSION_PROPOSE's; for an Ed25519 envelope, whose signature does not
// cover the Authorization header, a bearer token is taken only when it is
// the one those signed members name (rtldp3 #2), else BEARER_UNSIGNED.
func TestTaskToken(t *testing.T) {
	d := newDelegate(t, 1, "")
	c := newClient(2)
	s, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, &DelegateOSMember{DCT: "session-token"}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	submit := func(id string, tok *DelegateOSMember, bearer string) string {
		s.Bearer = bearer
		reply, err := s.Submit(ctx, &TaskSubmit{TaskID: id, Skill: "echo", Input: frame}, "", tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := reply.Body.(*TaskFailed); ok {
			return f.Error.Code
		}
		return ""
	}
	task := &DelegateOSMember{DCT: "task-token", Format: "dct"}
	for i, c := range []struct {
		tok          *DelegateOSMember
		bearer, code string
	}{
		{nil, "", ""},
		{nil, "session-token", ""},
		{task, "", ""},
		{task, "task-token", ""},
		{nil, "bearer-token", CodeBearerUnsigned},
		{task, "session-token", CodeBearerUnsigned},
	} {
		if code := submit(fmt.Sprintf("t%d", i), c.tok, c.bearer); code != c.code {
			t.Fatalf("member %+v, bearer %q: %q, want %q", c.tok, c.bearer, code, c.code)
		}
	}
	want := []string{"session-token", "session-token", "task-token", "task-token"}
	if len(d.exec.tokens) != len(want) {
		t.Fatalf("%d tasks ran, want %d", len(d.exec.tokens), len(want))
	}
	for i, tok := range d.exec.tokens {
		if tok == nil || tok.DCT != want[i] {
			t.Fatalf("task %d ran under %+v, want %s", i, tok, want[i])
		}
	}
}

// TestSessionExpiry: a session idle for its TTL answers SESSION_EXPIRED.
func TestSessionExpiry(t *testing.T) {
	now := time.Now()
	clk := func() time.Time { return now }
	d := newDelegate(t, 1, "")
	d.resp.Now = clk
	d.resp.Sessions = &Sessions{Now: clk}
	d.resp.Verifier.Now = clk
	c := newClient(2)
	c.Now = clk
	c.Verifier.Now = clk
	s, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{TTLSecs: ptr(uint64(30))}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(31 * time.Second)
	reply, err := s.Submit(ctx, &TaskSubmit{TaskID: "t", Skill: "echo", Input: frame}, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := reply.Body.(*TaskFailed); !ok || f.Error.Code != CodeSessionExpired {
		t.Fatalf("%+v", reply.Body)
	}
}

func TestHandlerHTTP(t *testing.T) {
	d := newDelegate(t, 1, "")
	get := func(path string) *http.Response {
		resp, err := http.Get(d.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := get(WellKnownPath); r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("card: %s", r.Status)
	}
	if r := get("/nope"); r.StatusCode != 404 {
		t.Fatalf("unknown path: %s", r.Status)
	}
	if r := get(MessagesPath); r.StatusCode != 405 {
		t.Fatalf("GET messages: %s", r.Status)
	}
	post := func(ct, body string) int {
		resp, err := http.Post(d.srv.URL+MessagesPath, ct, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post("text/plain", "{}"); c != 415 {
		t.Fatalf("text/plain: %d", c)
	}
	if c := post("application/json", `{"message_id":1}`); c != 400 {
		t.Fatalf("malformed: %d", c)
	}
	if c := post("application/json", strings.Repeat(" ", MaxEnvelopeSize+1)); c != 413 {
		t.Fatalf("too large: %d", c)
	}
}

// TestSessionAlgorithmBound: a session opened with the shared secret takes
// no envelope signed with some Ed25519 key, even from its peer's ID (which
// anyone can claim): otherwise whoever learned the session ID could submit
// tasks in it under its token.
func TestSessionAlgorithmBound(t *testing.T) {
	d := newDelegate(t, 1, "shared")
	c := &Client{ID: "ldp:delegate:router", TrustDomain: "research.internal", HMACSecret: "shared"}
	s, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, &DelegateOSMember{DCT: "session-token"}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	intruder := &Client{ID: "ldp:delegate:router", Key: testKey(7)}
	sub := &Envelope{SessionID: s.ID, To: "ldp:delegate:echo", Body: &TaskSubmit{TaskID: "t", Skill: "echo", Input: frame}, PayloadMode: ModeSemanticFrame}
	reply, err := intruder.Send(ctx, d.srv.URL, sub, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := reply.Body.(*TaskFailed); !ok || f.Error.Code != string(ReasonWrongKey) {
		t.Fatalf("%+v", reply.Body)
	}
	if len(d.exec.tokens) != 0 {
		t.Fatal("the intruder's task ran")
	}
}

// TestAdmitSession: the daemon's hook refuses a session before it exists.
func TestAdmitSession(t *testing.T) {
	d := newDelegate(t, 1, "")
	var seen *DelegateOSMember
	d.resp.AdmitSession = func(_ context.Context, e *Envelope, by Verified, tok *DelegateOSMember) *LdpError {
		seen = tok
		if tok == nil {
			return &LdpError{Code: "malformed_token", Category: "policy", Severity: "fatal", Message: "a delegation token is required"}
		}
		return nil
	}
	c := newClient(2)
	_, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", "")
	var rej *SessionRejected
	if !errors.As(err, &rej) || rej.Reject.Error.Code != "malformed_token" {
		t.Fatalf("%v", err)
	}
	// An Ed25519 SESSION_PROPOSE's token is its member; a bearer alone is
	// not signed (BEARER_UNSIGNED), one equal to the member is taken.
	_, err = c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "bearer-token", "")
	if !errors.As(err, &rej) || rej.Reject.Error.Code != CodeBearerUnsigned {
		t.Fatalf("a bearer alone: %v", err)
	}
	if _, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, &DelegateOSMember{DCT: "t"}, "t", ""); err != nil || seen.DCT != "t" {
		t.Fatalf("%v %+v", err, seen)
	}
}

// TestRefusedProposalSpendsNothing: SESSION_PROPOSEs refused by the trust
// check or AdmitSession, and HELLOs, take no place in the replay store, so
// strangers' keys cannot fill it.
func TestRefusedProposalSpendsNothing(t *testing.T) {
	d := newDelegate(t, 1, "")
	store := &MemoryReplay{}
	d.resp.Verifier.Replay = store
	d.resp.AdmitSession = func(context.Context, *Envelope, Verified, *DelegateOSMember) *LdpError {
		return &LdpError{Code: "token_required", Category: "policy", Severity: "fatal", Message: "no token"}
	}
	for i := byte(10); i < 20; i++ {
		c := newClient(i)
		if i%2 == 0 {
			c.TrustDomain = "stranger.org"
		}
		if _, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", ""); err == nil {
			t.Fatal("admitted")
		}
	}
	stranger := newClient(30)
	for _, b := range []Body{&TaskCancel{TaskID: "t"}, &SessionClose{}, &TaskSubmit{TaskID: "t", Skill: "echo", Input: frame}} {
		reply, err := stranger.Send(ctx, d.srv.URL, &Envelope{SessionID: "no-such-session", To: "ldp:delegate:echo", Body: b, PayloadMode: ModeText}, "", "")
		if f, ok := reply.Body.(*TaskFailed); err != nil || !ok || f.Error.Code != CodeSessionUnknown {
			t.Fatalf("%s outside a session: %v %+v", b.Type(), err, reply)
		}
	}
	if n := store.Len(); n != 0 {
		t.Fatalf("the replay store holds %d entries of refused strangers", n)
	}
}

// TestSessionEndEndsItsTasks (rtldp3 #9): SESSION_CLOSE ends the running
// tasks of the session before it is acknowledged (TASK_CANCELLED, saying
// why), and so does the session's expiry; the Executor is told
// (SessionEnder) to drop what it holds for them.
func TestSessionEndEndsItsTasks(t *testing.T) {
	for _, how := range []string{"closed", "expired"} {
		t.Run(how, func(t *testing.T) {
			d := newDelegate(t, 1, "")
			ended := make(chan string, 1)
			d.resp.Exec = &endingExec{echoExec: d.exec, ended: ended}
			c := newClient(2)
			cfg := SessionConfig{}
			if how == "expired" {
				ttl := uint64(1)
				cfg.TTLSecs = &ttl
			}
			s, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", cfg, nil, "", "")
			if err != nil {
				t.Fatal(err)
			}
			reply := make(chan *Envelope, 1)
			go func() {
				r, _ := s.Submit(ctx, &TaskSubmit{TaskID: "task-001", Skill: "slow", Input: json.RawMessage(`"x"`)}, ModeText, nil, nil)
				reply <- r
			}()
			<-d.exec.started
			if how == "closed" {
				if err := s.Close(ctx, "done"); err != nil {
					t.Fatal(err)
				}
				select {
				case sid := <-ended: // before the close was acknowledged
					if sid != s.ID {
						t.Fatalf("ended session %q, want %q", sid, s.ID)
					}
				default:
					t.Fatal("the close was acknowledged before the Executor was told")
				}
			} else if sid := <-ended; sid != s.ID {
				t.Fatalf("ended session %q, want %q", sid, s.ID)
			}
			r := <-reply
			f, ok := r.Body.(*TaskFailed)
			if !ok || f.Error.Code != CodeTaskCancelled || !strings.Contains(f.Error.Message, how) {
				t.Fatalf("the task of a %s session answered %+v", how, r.Body)
			}
		})
	}
}

// endingExec is echoExec that says which session ended.
type endingExec struct {
	*echoExec
	ended chan string
}

func (x *endingExec) EndSession(sid string) { x.ended <- sid }

// TestBudgetMicrocents: a contract budget in USD is held in whole
// microcents, down, without losing one to floating point (2e-6 USD is 200).
func TestBudgetMicrocents(t *testing.T) {
	for usd, want := range map[float64]int64{2e-6: 200, 3e-6: 300, 1e-6: 100, 2.5e-8: 2, 0.1: 10_000_000, 0: 0, 1e30: math.MaxInt64} {
		if got := BudgetMicrocents(usd); got != want {
			t.Errorf("%g USD: %d microcents, want %d", usd, got, want)
		}
	}
}
