package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/reputation"
	"github.com/delegateos/delegateos/revocation"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/ldp"
)

// The red team's attacks on serve as an LDP delegate (issue 21) that
// held: each says what was tried, through the real binary.

// TestLDPAttackEnvelopesRefused: within a holder's live session, a
// TASK_SUBMIT replayed byte for byte, tampered with after signing (input,
// skill, token member), unsigned, stale, from the future, signed by
// another key claiming the holder's ID, or signed with the shared secret
// (algorithm downgrade on an Ed25519 session) is refused with its own
// error, and none reaches the gate; nor does a forged SESSION_PROPOSE
// (HMAC with a token, a token's holder's ID under another key).
func TestLDPAttackEnvelopesRefused(t *testing.T) {
	env := mcptest.NewEnv(t)
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection + "  hmac_secret: \"a shared secret of 32 characters\"\n"
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	tok := env.Mint(mcptest.Budget(10_000), "mcp:echo:*")
	member := &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}
	ctx := context.Background()
	holder := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := holder.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}}, member, "", "")
	if err != nil {
		t.Fatal(err)
	}
	submit := func(id, input string) *ldp.Envelope {
		return peerEnvelope(s.ID, holder.ID, &ldp.TaskSubmit{TaskID: id, Skill: "echo", Input: json.RawMessage(input)}, ldp.ModeText)
	}

	// A good one runs, once; the same bytes again are a replay.
	good := peerSign(t, submit("t1", `"once"`), env.Agent.PrivateKey())
	if _, reply, body := peerPost(t, srv, "", good, ""); reply == nil || peerFailCode(reply) != "" {
		t.Fatalf("the good TASK_SUBMIT: %s", body)
	}
	if _, reply, body := peerPost(t, srv, "", good, ""); peerFailCode(reply) != string(ldp.ReasonReplayed) {
		t.Fatalf("replay: %s", body)
	}
	// The same through the stream endpoint is the same replay.
	if _, _, body := peerPost(t, srv, ldp.StreamPath, good, ""); !strings.Contains(string(body), string(ldp.ReasonReplayed)) {
		t.Fatalf("replay through the stream: %s", body)
	}
	// The same message with a new nonce (message_id kept) and a new
	// message_id (nonce kept) are replays too, once re-signed.
	e := submit("t2", `"again"`)
	peerSign(t, e, env.Agent.PrivateKey())
	msgID, nonce := e.MessageID, e.Nonce
	if _, reply, body := peerPost(t, srv, "", peerSign(t, e, env.Agent.PrivateKey()), ""); peerFailCode(reply) != "" {
		t.Fatalf("t2: %s", body)
	}
	e = submit("t3", `"x"`)
	e.MessageID = msgID
	if _, reply, body := peerPost(t, srv, "", peerSign(t, e, env.Agent.PrivateKey()), ""); peerFailCode(reply) != string(ldp.ReasonReplayed) {
		t.Fatalf("message_id reused: %s", body)
	}
	e = submit("t4", `"x"`)
	e.Nonce = nonce
	if _, reply, body := peerPost(t, srv, "", peerSign(t, e, env.Agent.PrivateKey()), ""); peerFailCode(reply) != string(ldp.ReasonReplayed) {
		t.Fatalf("nonce reused: %s", body)
	}

	// Tampered after signing: the input, the skill, a token member added.
	tamper := func(name string, edit func([]byte) []byte) {
		t.Helper()
		b := peerSign(t, submit("tamper-"+name, `"signed"`), env.Agent.PrivateKey())
		changed := edit(b)
		if bytes.Equal(changed, b) {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if _, reply, body := peerPost(t, srv, "", changed, ""); peerFailCode(reply) != string(ldp.ReasonTampered) {
			t.Fatalf("tampered %s: %s", name, body)
		}
	}
	tamper("input", func(b []byte) []byte { return bytes.Replace(b, []byte(`"signed"`), []byte(`"forged"`), 1) })
	tamper("timestamp", func(b []byte) []byte {
		var m map[string]any
		json.Unmarshal(b, &m)
		m["timestamp"] = timestamp.Format(time.Now().Add(time.Second))
		out, _ := json.Marshal(m)
		return out
	})
	tamper("token", func(b []byte) []byte {
		var m map[string]any
		json.Unmarshal(b, &m)
		m["delegateos"] = map[string]any{"dct": tok.String(), "format": dct.Format}
		out, _ := json.Marshal(m)
		return out
	})

	// Unsigned, and signature_algorithm without a signature.
	if _, reply, body := peerPost(t, srv, "", peerSign(t, submit("u", `"u"`), nil), ""); peerFailCode(reply) != string(ldp.ReasonUnsigned) {
		t.Fatalf("unsigned: %s", body)
	}
	// Stale, and from too far ahead (signed as such).
	for _, d := range []time.Duration{-2 * time.Minute, 2 * time.Minute} {
		e := submit("stale", `"s"`)
		e.Timestamp = timestamp.Format(time.Now().Add(d))
		if _, reply, body := peerPost(t, srv, "", peerSign(t, e, env.Agent.PrivateKey()), ""); peerFailCode(reply) != string(ldp.ReasonStale) {
			t.Fatalf("timestamp %s: %s", d, body)
		}
	}
	// Another key that knows the holder's ID and the session's.
	thief := mcptest.NewKey(t, "thief")
	if _, reply, body := peerPost(t, srv, "", peerSign(t, submit("thief", `"t"`), thief.PrivateKey()), ""); peerFailCode(reply) != string(ldp.ReasonWrongKey) {
		t.Fatalf("another key in the session: %s", body)
	}
	// Algorithm downgrade: the shared secret on an Ed25519 session.
	e = submit("hmac", `"h"`)
	ldp.SignHMAC(e, "a shared secret of 32 characters")
	if _, reply, body := peerPost(t, srv, "", peerSign(t, e, nil), ""); peerFailCode(reply) != string(ldp.ReasonWrongKey) {
		t.Fatalf("hmac on an ed25519 session: %s", body)
	}
	// The same with the holder's token as a bearer: still the session's key.
	e = submit("hmac-bearer", `"h"`)
	ldp.SignHMAC(e, "a shared secret of 32 characters")
	if _, reply, body := peerPost(t, srv, "", peerSign(t, e, nil), tok.String()); peerFailCode(reply) != string(ldp.ReasonWrongKey) {
		t.Fatalf("hmac with a bearer: %s", body)
	}

	// A SESSION_PROPOSE with the token, signed with the shared secret: no
	// holder shown, so no session.
	propose := peerEnvelope("", "ldp:delegate:holder", &ldp.SessionPropose{Config: ldp.SessionConfig{TrustDomain: "research"}}, ldp.ModeText)
	propose.DelegateOS = member
	ldp.SignHMAC(propose, "a shared secret of 32 characters")
	if _, reply, body := peerPost(t, srv, "", peerSign(t, propose, nil), ""); peerFailCode(reply) != string(ldp.ReasonWrongKey) {
		t.Fatalf("hmac SESSION_PROPOSE with a token: %s", body)
	}
	// An HMAC session with no token is refused too (token_required).
	propose = peerEnvelope("", "ldp:delegate:holder", &ldp.SessionPropose{Config: ldp.SessionConfig{TrustDomain: "research"}}, ldp.ModeText)
	ldp.SignHMAC(propose, "a shared secret of 32 characters")
	if _, reply, body := peerPost(t, srv, "", peerSign(t, propose, nil), ""); peerFailCode(reply) != "token_required" {
		t.Fatalf("hmac SESSION_PROPOSE: %s", body)
	}
	// Replaying the holder's own SESSION_PROPOSE opens nothing.
	propose = peerEnvelope("", "ldp:delegate:holder", &ldp.SessionPropose{Config: ldp.SessionConfig{TrustDomain: "research"}}, ldp.ModeText)
	propose.DelegateOS = member
	pb := peerSign(t, propose, env.Agent.PrivateKey())
	if _, reply, body := peerPost(t, srv, "", pb, ""); reply == nil || peerFailCode(reply) != "" {
		t.Fatalf("the holder's SESSION_PROPOSE: %s", body)
	}
	if _, reply, body := peerPost(t, srv, "", pb, ""); peerFailCode(reply) != string(ldp.ReasonReplayed) {
		t.Fatalf("a replayed SESSION_PROPOSE: %s", body)
	}

	if n := peerAllowed(t, srv, "echo", 2); n != 2 {
		t.Fatalf("%d echo calls reached the gate, want the 2 good ones", n)
	}
}

// TestLDPAttackRequireEd25519: with require_ed25519, an HMAC HELLO or
// SESSION_PROPOSE (the secret known) is refused as an algorithm the
// delegate does not take.
func TestLDPAttackRequireEd25519(t *testing.T) {
	env := mcptest.NewEnv(t)
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection + "  hmac_secret: \"a shared secret of 32 characters\"\n  require_ed25519: true\n"
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	for _, body := range []ldp.Body{&ldp.Hello{DelegateID: "ldp:delegate:x", SupportedModes: []ldp.PayloadMode{ldp.ModeText}},
		&ldp.SessionPropose{Config: ldp.SessionConfig{TrustDomain: "research"}}} {
		e := peerEnvelope("", "ldp:delegate:x", body, ldp.ModeText)
		ldp.SignHMAC(e, "a shared secret of 32 characters")
		if _, reply, raw := peerPost(t, srv, "", peerSign(t, e, nil), ""); peerFailCode(reply) != string(ldp.ReasonAlgorithm) {
			t.Fatalf("%s: %s", body.Type(), raw)
		}
	}
}

// TestLDPAttackTokenPlacement: which token a task runs under, and who
// may use a session. The TASK_SUBMIT's member wins over the session's
// token (a narrower one is the one the gate sees); a bearer other than
// the signed token is refused BEARER_UNSIGNED; another token holder who knows the session's
// ID and its peer's ID cannot put a task in it, nor cancel or close it.
func TestLDPAttackTokenPlacement(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	ctx := context.Background()
	wide := env.Mint(nil, "mcp:echo:*")
	narrow := env.Mint(nil, "docs:read:/**")
	holder := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := holder.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}},
		&ldp.DelegateOSMember{DCT: wide.String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	task := func(id string) *ldp.TaskSubmit {
		return &ldp.TaskSubmit{TaskID: id, Skill: "echo", Input: json.RawMessage(`"x"`)}
	}
	// The member (narrow) wins over the session's (wide).
	reply, err := s.Submit(ctx, task("member"), "", &ldp.DelegateOSMember{DCT: narrow.String(), Format: dct.Format}, nil)
	if err != nil || peerFailCode(reply) != "capability_not_granted" {
		t.Fatalf("member token: %v %s", err, peerFailCode(reply))
	}
	// A bearer other than the signed token (the session's, here) is
	// refused: the Ed25519 signature does not cover it (rtldp3 #2).
	e := peerEnvelope(s.ID, holder.ID, task("bearer"), ldp.ModeText)
	if _, reply, body := peerPost(t, srv, "", peerSign(t, e, env.Agent.PrivateKey()), narrow.String()); peerFailCode(reply) != ldp.CodeBearerUnsigned {
		t.Fatalf("bearer token: %s", body)
	}
	// So is one other than the member.
	e = peerEnvelope(s.ID, holder.ID, task("both"), ldp.ModeText)
	e.DelegateOS = &ldp.DelegateOSMember{DCT: narrow.String(), Format: dct.Format}
	if _, reply, body := peerPost(t, srv, "", peerSign(t, e, env.Agent.PrivateKey()), wide.String()); peerFailCode(reply) != ldp.CodeBearerUnsigned {
		t.Fatalf("member and bearer: %s", body)
	}
	// A member in another format is refused, not ignored.
	reply, err = s.Submit(ctx, task("format"), "", &ldp.DelegateOSMember{DCT: wide.String(), Format: "jwt"}, nil)
	if err != nil || peerFailCode(reply) != "malformed_token" {
		t.Fatalf("other format: %v %s", err, peerFailCode(reply))
	}

	// Another holder, with a valid token of its own, opens its own
	// session and then aims at the first one.
	other := mcptest.NewKey(t, "other")
	otherTok := env.Mint(func(p *dct.CreateParams) { p.Delegatee = other.ID() }, "mcp:echo:*")
	oc := &ldp.Client{ID: "ldp:delegate:other", TrustDomain: "research", Key: other.PrivateKey(), Verifier: &ldp.Verifier{}}
	if _, err := oc.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: otherTok.String(), Format: dct.Format}, "", ""); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]ldp.Body{"submit": task("ride"), "cancel": &ldp.TaskCancel{TaskID: "ride"},
		"close": &ldp.SessionClose{}} {
		// As itself: the session is not its own.
		e := peerEnvelope(s.ID, oc.ID, body, ldp.ModeText)
		if name == "submit" {
			e.DelegateOS = &ldp.DelegateOSMember{DCT: otherTok.String(), Format: dct.Format}
		}
		if _, reply, raw := peerPost(t, srv, "", peerSign(t, e, other.PrivateKey()), ""); peerFailCode(reply) != ldp.CodeSessionUnknown {
			t.Fatalf("%s in another's session as itself: %s", name, raw)
		}
		// Claiming the holder's ID.
		e = peerEnvelope(s.ID, holder.ID, body, ldp.ModeText)
		if name == "submit" {
			e.DelegateOS = &ldp.DelegateOSMember{DCT: otherTok.String(), Format: dct.Format}
		}
		if _, reply, raw := peerPost(t, srv, "", peerSign(t, e, other.PrivateKey()), otherTok.String()); peerFailCode(reply) != string(ldp.ReasonWrongKey) {
			t.Fatalf("%s in another's session under its ID: %s", name, raw)
		}
	}
	// The holder's session is still there and works.
	if reply, err := s.Submit(ctx, task("still"), "", nil, nil); err != nil || peerFailCode(reply) != "" {
		t.Fatalf("the holder's session after the attempts: %v %s", err, peerFailCode(reply))
	}
	if n := peerAllowed(t, srv, "echo", 1); n != 1 {
		t.Fatalf("%d echo calls allowed, want 1", n)
	}
}

// TestLDPAttackCancel: a TASK_CANCEL racing a running task. The call is
// charged when it reached the tool (which may have done the work: never a
// refund) and released only when it never left the gate, exactly as the
// gate's decision line says, once; a cancel that comes after the result
// changes nothing (TASK_UNKNOWN: no second charge, no refund). Budget 200,
// slow and echo at 100 each: the echoes that follow run until the budget
// the cancelled call left is spent.
func TestLDPAttackCancel(t *testing.T) {
	env := mcptest.NewEnv(t)
	pol := env.Policy(mcptest.Priced("echo", 100), mcptest.Priced("slow", 100))
	pol.Extra = serveLDPSection + "    - {name: slow, tool: slow}\n"
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	ctx := context.Background()
	member := &ldp.DelegateOSMember{DCT: env.Mint(mcptest.Budget(200), "mcp:echo:*", "mcp:slow:*").String(), Format: dct.Format}
	holder := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := holder.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}}, member, "", "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *ldp.Envelope, 1)
	go func() {
		reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "slow", Skill: "slow", Input: json.RawMessage(`{"steps":1000,"delay_ms":50}`)}, "", nil, nil)
		if err != nil {
			t.Error(err)
		}
		done <- reply
	}()
	// Cancel until the delegate says it cancelled the running task.
	for i := 0; ; i++ {
		reply, err := s.Send(ctx, &ldp.TaskCancel{TaskID: "slow"})
		if err != nil {
			t.Fatal(err)
		}
		if u, ok := reply.Body.(*ldp.TaskUpdate); ok && u.Message != nil && *u.Message == "cancelled" {
			break
		}
		if c := peerFailCode(reply); c != ldp.CodeTaskUnknown || i > 10_000 {
			t.Fatalf("cancel %d: %s", i, c)
		}
	}
	if reply := <-done; reply == nil || peerFailCode(reply) == "" {
		t.Fatalf("the cancelled task: %+v", reply)
	}
	line := srv.WaitLog("decision", func(l map[string]any) bool { return l["tool"] == "slow" })
	charged := line["cost"] == 100.0
	if released := line["outcome"] == "not forwarded"; charged == released || line["allowed"] != true {
		t.Fatalf("the cancelled call: %v", line)
	}
	echo := func(id string) string {
		reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: id, Skill: "echo", Input: json.RawMessage(`"x"`)}, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return peerFailCode(reply)
	}
	if c := echo("e1"); c != "" {
		t.Fatalf("the first echo after the cancel: %s", c)
	}
	// A cancel after the result: the task is not running.
	reply, err := s.Send(ctx, &ldp.TaskCancel{TaskID: "e1"})
	if err != nil || peerFailCode(reply) != ldp.CodeTaskUnknown {
		t.Fatalf("cancel after the result: %v %s", err, peerFailCode(reply))
	}
	want := "budget_exceeded"
	if !charged {
		want = ""
	}
	if c := echo("e2"); c != want {
		t.Fatalf("the second echo: %q, want %q (the cancelled call was charged: %v)", c, want, charged)
	}
	t.Logf("the cancelled call: outcome %v, cost %v", line["outcome"], line["cost"])
}

// TestLDPAttackJSONEdges: envelopes that could be read two ways are
// refused before anything (signed as they are, so the signature is not
// what refuses them): duplicate members (two tokens, two inputs),
// case-variant member names, a body type in another case, deep nesting in
// the input, invalid UTF-8 and lone surrogates in an ID, a huge body.
// Unicode IDs that are valid are taken and stay distinct.
func TestLDPAttackJSONEdges(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	ctx := context.Background()
	tok := env.Mint(nil, "mcp:echo:*")
	member := &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}
	holder := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := holder.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}}, member, "", "")
	if err != nil {
		t.Fatal(err)
	}
	base := string(peerSign(t, peerEnvelope(s.ID, holder.ID, &ldp.TaskSubmit{TaskID: "j", Skill: "echo", Input: json.RawMessage(`"x"`)}, ldp.ModeText), env.Agent.PrivateKey()))
	edits := map[string]string{
		"duplicate input":     strings.Replace(base, `"input":"x"`, `"input":"x","input":"y"`, 1),
		"duplicate token":     strings.Replace(base, `"body":`, `"delegateos":{"dct":"a"},"delegateos":{"dct":"b"},"body":`, 1),
		"case-variant member": strings.Replace(base, `"body":`, `"Body":{},"body":`, 1),
		"case-variant type":   strings.Replace(base, `"TASK_SUBMIT"`, `"task_submit"`, 1),
		"deep input":          strings.Replace(base, `"input":"x"`, `"input":`+strings.Repeat("[", 100)+strings.Repeat("]", 100), 1),
		"invalid utf-8":       strings.Replace(base, `"task_id":"j"`, "\"task_id\":\"j\xff\"", 1),
		"lone surrogate":      strings.Replace(base, `"task_id":"j"`, `"task_id":"j\ud800"`, 1),
		"trailing data":       base + `{}`,
	}
	for name, b := range edits {
		if b == base {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		status, reply, raw := peerPost(t, srv, "", []byte(b), "")
		if status != http.StatusBadRequest || reply != nil || !strings.Contains(string(raw), string(ldp.ReasonMalformed)) {
			t.Fatalf("%s: HTTP %d %s", name, status, raw)
		}
	}
	huge := []byte(`{"x":"` + strings.Repeat("a", ldp.MaxEnvelopeSize) + `"}`)
	if status, _, _ := peerPost(t, srv, "", huge, ""); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("huge: HTTP %d", status)
	}
	// Task IDs that differ only by Unicode normalisation are two tasks.
	for _, id := range []string{"caf\u00e9", "cafe\u0301"} {
		if reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: id, Skill: "echo", Input: json.RawMessage(`"x"`)}, "", nil, nil); err != nil || peerFailCode(reply) != "" {
			t.Fatalf("task %q: %v %s", id, err, peerFailCode(reply))
		}
	}
	if n := peerAllowed(t, srv, "echo", 2); n != 2 {
		t.Fatalf("%d echo calls, want 2", n)
	}
}

// TestLDPAttackTrustAndModes: a session from another trust domain, or
// whose initiator names none, or that requires another domain, or names
// the delegate's domain in another case, is rejected before anything is
// spent; a text task in a session that negotiated frames is taken (text
// is always in the chain), but a frame in a text session is refused, and
// a failed frame's fallback moves only its own session.
func TestLDPAttackTrustAndModes(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	ctx := context.Background()
	member := &ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}
	for _, cfg := range []ldp.SessionConfig{{TrustDomain: "elsewhere"}, {TrustDomain: "Research"}, {TrustDomain: "research "},
		{TrustDomain: "research", RequiredTrustDomain: "finance"}} {
		c := &ldp.Client{ID: "ldp:delegate:holder", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
		if _, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", cfg, member, "", ""); err == nil {
			t.Fatalf("session from %+v accepted", cfg)
		}
	}
	c := &ldp.Client{ID: "ldp:delegate:holder", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	if _, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, member, "", ""); err == nil {
		t.Fatal("a session from an initiator that names no domain was accepted")
	}
	c.TrustDomain = "research"
	text, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}}, member, "", "")
	if err != nil {
		t.Fatal(err)
	}
	frames, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, member, "", "")
	if err != nil || frames.Payload.Mode != ldp.ModeSemanticFrame {
		t.Fatalf("frames session: %v", err)
	}
	reply, err := text.Submit(ctx, &ldp.TaskSubmit{TaskID: "f", Skill: "echo", Input: json.RawMessage(`{"task_type":"echo","instruction":"x"}`)}, ldp.ModeSemanticFrame, nil, nil)
	if err != nil || peerFailCode(reply) != ldp.CodePayloadMode {
		t.Fatalf("a frame in a text session: %v %s", err, peerFailCode(reply))
	}
	// A bad frame in another session of the same peer moves only that one.
	other, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, member, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if reply, _ := other.Submit(ctx, &ldp.TaskSubmit{TaskID: "bad", Skill: "echo", Input: json.RawMessage(`{"instruction":"x"}`)}, "", nil, nil); peerFailCode(reply) != ldp.CodeFrameInvalid {
		t.Fatalf("bad frame: %s", peerFailCode(reply))
	}
	if reply, err := frames.Submit(ctx, &ldp.TaskSubmit{TaskID: "ok", Skill: "echo", Input: json.RawMessage(`{"task_type":"echo","instruction":"x"}`)}, ldp.ModeSemanticFrame, nil, nil); err != nil || peerFailCode(reply) != "" {
		t.Fatalf("a frame in the untouched session: %v %s", err, peerFailCode(reply))
	}
}

// TestLDPAttackReplayStoreFlood (broke, fixed): one holder with one
// session sends TASK_CANCELs of no task as fast as it can (each spends a
// message ID and a nonce in the replay store, whose 100,000 places were
// shared by every peer with no share per signer); once the store was full
// (30 s of loopback traffic), another holder's SESSION_PROPOSE was refused
// replay_store_busy. Now the hog is refused at its share (12,500 places,
// about 6,000 cancels) and the other holder opens its session.
func TestLDPAttackReplayStoreFlood(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	ctx := context.Background()
	// The hog checks no replies (its own replay store would fill too).
	hog := &ldp.Client{ID: "ldp:delegate:hog", TrustDomain: "research", Key: env.Agent.PrivateKey()}
	s, err := hog.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var full sync.Once
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40_000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				reply, err := s.Send(ctx, &ldp.TaskCancel{TaskID: "none"})
				if err != nil {
					t.Error(err)
					return
				}
				if peerFailCode(reply) == string(ldp.ReasonBusy) {
					full.Do(func() { close(stop) })
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-stop:
	default:
		t.Fatal("the hog was never refused its share")
	}
	other := mcptest.NewKey(t, "other")
	oc := &ldp.Client{ID: "ldp:delegate:other", TrustDomain: "research", Key: other.PrivateKey(), Verifier: &ldp.Verifier{}}
	otherTok := env.Mint(func(p *dct.CreateParams) { p.Delegatee = other.ID() }, "mcp:echo:*")
	if _, err := oc.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: otherTok.String(), Format: dct.Format}, "", ""); err != nil {
		t.Fatalf("another holder is refused after one holder's cancels: %v", err)
	}
}

// TestLDPAttackVerifiedClaimRecorded (broke, fixed): a delegate that
// said verified:true in its provenance got 1.0 recorded by 'ldp submit
// --record', which the next 'ldp route' ranks by: a delegate set its own
// reputation. Now the claim is shown, and nothing is recorded without
// the initiator's --score.
func TestLDPAttackVerifiedClaimRecorded(t *testing.T) {
	env := mcptest.NewEnv(t)
	tok := env.Mint(nil, "docs:read:/**")
	tokFile := filepath.Join(env.Dir, "agent.tok")
	os.WriteFile(tokFile, []byte(tok.String()), 0o600)
	liar := ldpDelegate(t, env.Root, []ldp.PayloadMode{ldp.ModeText}, nil)
	liar.gate.verified = true // nothing verified anything: the delegate just says so
	ws := t.TempDir()
	observer := identity.DIDFromPublicKey(env.Root.Public())
	out, errs, code := mcptest.CLI(t, "ldp", "submit", "--key", env.KeyFile(env.Agent), "--token", "@"+tokFile, "--skill", "summarize",
		"--input", `"x"`, "--trust-domain", "research", "--record", "--source", observer, "--workspace", ws, liar.url)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(out, "recorded: domain-competence") || !strings.Contains(out, "not recorded: the delegate says its result is verified (tool_verified), which is its own claim") {
		t.Fatalf("the delegate's own claim of verification was recorded as a signal for it:\n%s", out)
	}
}

// TestLDPAttackBudgetConcurrent (broke, fixed: every task serve ran
// called its tool with the JSON-RPC id 1 in the one stateless session of
// its token, so 29 of 30 concurrent tasks under one token were refused "a
// request with this id is already in flight": fail closed, but one task at
// a time): a token of budget 1000 and echo at 100,
// 30 tasks at once over three sessions of the same holder (and the
// stream endpoint for a third of them): exactly 10 run, the others are
// refused budget_exceeded, and the gate allowed exactly 10.
func TestLDPAttackBudgetConcurrent(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	ctx := context.Background()
	member := &ldp.DelegateOSMember{DCT: env.Mint(mcptest.Budget(1000), "mcp:echo:*").String(), Format: dct.Format}
	holder := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	var sessions []*ldp.ClientSession
	for range 3 {
		s, err := holder.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}}, member, "", "")
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var update func(*ldp.Envelope)
			if i%3 == 0 {
				update = func(*ldp.Envelope) {}
			}
			reply, err := sessions[i%3].Submit(ctx, &ldp.TaskSubmit{TaskID: fmt.Sprintf("t%d", i), Skill: "echo", Input: json.RawMessage(`"x"`)}, "", nil, update)
			code := "error"
			if err == nil {
				code = peerFailCode(reply)
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[""] != 10 || codes["budget_exceeded"] != 20 {
		t.Fatalf("outcomes %v, want 10 results and 20 budget_exceeded", codes)
	}
	if n := peerAllowed(t, srv, "echo", 10); n != 10 {
		t.Fatalf("the gate allowed %d echo calls, want 10", n)
	}
}

// TestLDPAttackCardEndpointPoisoned (broke, fixed): the card's endpoint
// was "where the first request reached the server": a stranger's first
// GET with another Host (any port of a name the Host guard takes) fixed
// the endpoint every later peer was shown, and the address envelopes
// could be sent to. Now each request's card names the address it
// reached, and an envelope may be addressed to the address its own
// request reached, not to one another request named.
func TestLDPAttackCardEndpointPoisoned(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	req, _ := http.NewRequest(http.MethodGet, srv.Base+ldp.WellKnownPath, nil)
	req.Host = "localhost:1"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	card, err := (&ldp.Client{}).Discover(context.Background(), srv.Base)
	if err != nil {
		t.Fatal(err)
	}
	if card.Endpoint != srv.Base {
		t.Fatalf("the card's endpoint is %q, set by a stranger's Host header; want %q", card.Endpoint, srv.Base)
	}
	hello := func(to string) string {
		e := peerEnvelope("", "ldp:delegate:x", &ldp.Hello{DelegateID: "ldp:delegate:x", SupportedModes: []ldp.PayloadMode{ldp.ModeText}}, ldp.ModeText)
		e.To = to
		_, reply, _ := peerPost(t, srv, "", peerSign(t, e, mcptest.NewKey(t, "x").PrivateKey()), "")
		return peerFailCode(reply)
	}
	if c := hello(srv.Base); c != "" {
		t.Fatalf("a HELLO to the URL it was sent to: %s", c)
	}
	if c := hello("http://localhost:1"); c != ldp.CodeMisaddressed {
		t.Fatalf("a HELLO to the stranger's Host: %q, want %s", c, ldp.CodeMisaddressed)
	}
}

// TestLDPAttackContractIgnored (broke, fixed): a TASK_SUBMIT's contract
// asked for a budget below the skill's cost (max_cost_usd 1e-7, echo costs
// 100 microcents = 1e-6 USD); the issue says a contract is honoured or
// refused, never ignored, but the task ran and was charged 100. Now it is
// refused CONTRACT_REFUSED before the gate; a contract the cost fits runs.
func TestLDPAttackContractIgnored(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	ctx := context.Background()
	member := &ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}
	holder := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := holder.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}}, member, "", "")
	if err != nil {
		t.Fatal(err)
	}
	max := 1e-7
	c := &ldp.DelegationContract{ContractID: "c1", Objective: "echo", CreatedAt: "2026-01-01T00:00:00Z",
		Policy: ldp.PolicyEnvelope{FailurePolicy: ldp.FailClosed, Budget: &ldp.BudgetPolicy{MaxCostUSD: &max}}}
	reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t", Skill: "echo", Input: json.RawMessage(`"x"`), Contract: c}, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := peerFailCode(reply); code == "" {
		t.Fatalf("a task whose contract allows 1e-7 USD ran at a cost of 1e-6 USD (the contract's budget was ignored)")
	}
	if code := peerFailCode(reply); code != ldp.CodeContract {
		t.Fatalf("refused %q, want %s", code, ldp.CodeContract)
	}
	enough := 1e-5
	c.Policy.Budget.MaxCostUSD = &enough
	reply, err = s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t2", Skill: "echo", Input: json.RawMessage(`"x"`), Contract: c}, "", nil, nil)
	if err != nil || peerFailCode(reply) != "" {
		t.Fatalf("a contract the cost fits: %v %s", err, peerFailCode(reply))
	}
	if n := peerAllowed(t, srv, "echo", 1); n != 1 {
		t.Fatalf("%d echo calls, want 1", n)
	}
}

// TestLDPAttackStrangerBodies (broke, fixed): the MCP endpoint holds a
// body with no credential to 64 KiB and every body to a share of
// --max-body-bytes-in-flight, refused 413 or 503 unread; the LDP
// endpoints read any stranger's body up to 1 MiB outside that budget
// (ldp.Handler's own io.ReadAll), so each of a stranger's connections
// could hold 1 MiB of the server's memory, with no bound on them. Here a
// stranger declares a body of 1 MiB (over the anonymous share of a 2 MiB
// budget) and sends none: it was read until the read timeout (HTTP 400);
// now it is refused at once, unread.
func TestLDPAttackStrangerBodies(t *testing.T) {
	env := mcptest.NewEnv(t)
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server")),
		"--max-body-bytes", "1048576", "--max-body-bytes-in-flight", "2097152", "--read-timeout", "2s"}})
	conn, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", ldp.MessagesPath, srv.Addr, ldp.MaxEnvelopeSize)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusRequestEntityTooLarge && res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stranger's 1 MiB body was taken for reading (HTTP %d after the read timeout), outside the body budget", res.StatusCode)
	}
}

// TestLDPAttackAttestation: ATTESTATION as a way to set reputation. The
// initiator's attestation of its finished task counts once: the same
// attestation again in a new envelope is refused as a repeat, and the
// envelope replayed byte for byte as a replay. (Another's signed
// attestation, another agent, another's task: TestServeLDPAttestation.)
func TestLDPAttackAttestation(t *testing.T) {
	env := mcptest.NewEnv(t)
	ws := filepath.Join(env.Dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection + "workspace: " + ws + "\n"
	serverKey := mcptest.NewKey(t, "server")
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(serverKey)}})
	ctx := context.Background()
	c := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"task-1", "task-2"} {
		if reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: id, Skill: "echo", Input: json.RawMessage(`"x"`)}, ldp.ModeText, nil, nil); err != nil || peerFailCode(reply) != "" {
			t.Fatalf("task %s: %v %+v", id, err, reply)
		}
	}
	attest := func(task string) json.RawMessage {
		a := &reputation.Attestation{ToDID: serverKey.DID(), Outcome: reputation.OutcomePositive, Weight: 1, Context: "ldp:ldp:delegate:docs:" + task}
		if err := reputation.SignAttestation(a, env.Agent); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(a)
		return b
	}
	// (Of itself: reputation.SignAttestation will not sign one, and the
	// delegate verifies each with the same Attestation.Verify, which
	// refuses it: reputation's tests.) Twice in two envelopes, then one
	// replayed.
	claim := attest("task-1")
	if reply, err := s.Send(ctx, &ldp.Attestation{Claim: claim, Evidence: json.RawMessage(`{}`)}); err != nil || reply != nil {
		t.Fatalf("attestation: %v %+v", err, reply)
	}
	if reply, err := s.Send(ctx, &ldp.Attestation{Claim: claim, Evidence: json.RawMessage(`{}`)}); err != nil || peerFailCode(reply) != ldp.CodeAttestationRepeated {
		t.Fatalf("the same attestation again: %v %+v", err, reply)
	}
	e := peerEnvelope(s.ID, c.ID, &ldp.Attestation{Claim: attest("task-2"), Evidence: json.RawMessage(`{}`)}, ldp.ModeText)
	b := peerSign(t, e, env.Agent.PrivateKey())
	if _, reply, raw := peerPost(t, srv, "", b, ""); reply != nil {
		t.Fatalf("task-2's attestation: %s", raw)
	}
	if _, reply, raw := peerPost(t, srv, "", b, ""); peerFailCode(reply) != string(ldp.ReasonReplayed) {
		t.Fatalf("a replayed ATTESTATION: %s", raw)
	}
	out, errs, code := mcptest.CLI(t, "reputation", "show", serverKey.DID(), "--workspace", ws, "--json")
	if code != 0 || !strings.Contains(out, `"signals": 2`) {
		t.Fatalf("each task's attestation did not count once: exit %d\n%s%s", code, out, errs)
	}
}

// TestLDPAttackApproval: a skill whose tool the policy holds for
// approval. An LDP peer is not an MCP client that could be asked, so the
// task must not hang holding a reservation: it is refused at once,
// approval_unavailable, as an MCP client without elicitation is.
func TestLDPAttackApproval(t *testing.T) {
	env := mcptest.NewEnv(t)
	rule := mcptest.Priced("echo", 100)
	rule.Approval = "required"
	pol := env.Policy(rule)
	pol.Extra = serveLDPSection
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}},
		&ldp.DelegateOSMember{DCT: env.Mint(mcptest.Budget(100), "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t", Skill: "echo", Input: json.RawMessage(`"x"`)}, "", nil, nil)
	if err != nil {
		t.Fatalf("the task under approval: %v", err)
	}
	if c := peerFailCode(reply); c != "approval_unavailable" {
		t.Fatalf("a task that needs approval: %q, want approval_unavailable", c)
	}
}

// TestLDPAttackNarrowedTokensShareBudget: ldp submit narrows the token
// afresh for every task (a new delegation, its own budget). A holder who
// narrows its token of budget 250 into several tokens of 200 each, and
// runs tasks under each, still spends at most 250 in all: echo at 100,
// two tasks pass and the rest are refused, whichever token they carry.
func TestLDPAttackNarrowedTokensShareBudget(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	ctx := context.Background()
	parent := env.Mint(mcptest.Budget(250), "mcp:echo:*")
	c := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}},
		&ldp.DelegateOSMember{DCT: parent.String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for i := range 3 {
		narrowed := mcptest.Attenuate(t, parent, env.Agent, env.Agent, 200, "mcp:echo:*")
		for j := range 2 {
			reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: fmt.Sprintf("t%d-%d", i, j), Skill: "echo", Input: json.RawMessage(`"x"`)}, "",
				&ldp.DelegateOSMember{DCT: narrowed.String(), Format: dct.Format}, nil)
			if err != nil {
				t.Fatal(err)
			}
			switch c := peerFailCode(reply); c {
			case "":
				ran++
			case "budget_exceeded":
			default:
				t.Fatalf("task %d-%d: %s", i, j, c)
			}
		}
	}
	if ran != 2 {
		t.Fatalf("%d tasks of 100 ran under narrowings of a token of 250, want 2", ran)
	}
}

// TestLDPAttackRevokedMidSession (broke, fixed): once a session's token
// is revoked (delegateos revoke appends to the policy's list), its next
// tasks were refused, but as TASK_EXECUTION_ERROR, category runtime,
// retryable (serve's endpoint answered the inner call 401), not as the
// DelegateOS denial an MCP client gets; and ldp submit --record counts a
// runtime failure against the delegate (0.0). Now the task's token is
// checked as the endpoint checks it: TASK_FAILED revoked, category policy.
// A new session with that token is rejected.
func TestLDPAttackRevokedMidSession(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv, list := startLDPServeRevocable(t, env, serveLDPSection, mcptest.Priced("echo", 100))
	ctx := context.Background()
	tok := env.Mint(nil, "mcp:echo:*")
	member := &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}
	c := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}}, member, "", "")
	if err != nil {
		t.Fatal(err)
	}
	lastMsg := ""
	task := func(id string) string {
		reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: id, Skill: "echo", Input: json.RawMessage(`"x"`)}, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := reply.Body.(*ldp.TaskFailed); ok {
			lastMsg = f.Error.Message
		}
		return peerFailCode(reply)
	}
	if c := task("before"); c != "" {
		t.Fatalf("before the revocation: %s", c)
	}
	e, err := revocation.NewEntry(env.Root, tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := revocation.Append(list, e); err != nil {
		t.Fatal(err)
	}
	n := 0
	mcptest.Eventually(t, "the session's task refused revoked", func() bool {
		n++
		switch c := task(fmt.Sprintf("after-%d", n)); c {
		case "revoked":
			return true
		case "":
			return false // the list not yet reloaded
		default:
			t.Fatalf("after the revocation: %s (%s)", c, lastMsg)
			return false
		}
	})
	if _, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, member, "", ""); err == nil || !strings.Contains(err.Error(), "invalid_token") {
		t.Fatalf("a new session with the revoked token: %v", err)
	}
}

// TestLDPAttackReloadedCost (broke, fixed): a reload (SIGHUP) that
// changes a skill's tool's cost. The gate charged the new cost (300) while
// the TASK_RESULT's provenance (cost_charged_microcents, which ldp submit
// prints as what the gate charged) and the card said the old one (100):
// the LDP front read the policy it started with. Now both follow the
// policy in force.
func TestLDPAttackReloadedCost(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	policyPath := ""
	for i, a := range srv.Cmd.Args {
		if a == "--policy" {
			policyPath = srv.Cmd.Args[i+1]
		}
	}
	pol := env.Policy(mcptest.Priced("echo", 300))
	pol.Extra = serveLDPSection
	mcptest.WriteFile(t, policyPath, pol.YAML())
	srv.Signal(syscall.SIGHUP)
	srv.WaitLog("policy reloaded", nil)
	ctx := context.Background()
	c := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}},
		&ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t", Skill: "echo", Input: json.RawMessage(`"x"`)}, "", nil, nil)
	if err != nil || peerFailCode(reply) != "" {
		t.Fatalf("task: %v %s", err, peerFailCode(reply))
	}
	line := srv.WaitLog("decision", func(l map[string]any) bool { return l["tool"] == "echo" })
	p := reply.Body.(*ldp.TaskResult).Provenance
	if line["cost"] != 300.0 || p.DelegateOS == nil || p.DelegateOS.CostChargedMicrocents == nil || *p.DelegateOS.CostChargedMicrocents != 300 {
		t.Fatalf("the gate charged %v; provenance says %+v", line["cost"], p.DelegateOS)
	}
	card, err := c.Discover(ctx, srv.Base)
	if err != nil {
		t.Fatal(err)
	}
	if got := card.Metadata[ldp.MetaCostPrefix+"echo"]; got != "300" {
		t.Fatalf("the card says echo costs %s after the reload, the gate charges 300", got)
	}
}

// TestLDPAttackLatencyHintSkewed (broke, fixed): the card's
// latency_hint_ms_p50 is "what this server measured", and it counted
// every call, refusals included: any token holder whose token does not
// even grant the skill sent tasks the gate refused in a fraction of a
// millisecond and set the hint other routers read (1 ms after one 50 ms
// call and five refusals). Now only calls the tool answered count.
func TestLDPAttackLatencyHintSkewed(t *testing.T) {
	env := mcptest.NewEnv(t)
	pol := env.Policy(mcptest.Priced("echo", 100), mcptest.Priced("slow", 100))
	pol.Extra = serveLDPSection + "    - {name: slow, tool: slow}\n"
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	ctx := context.Background()
	open := func(tok *dct.Token) *ldp.ClientSession {
		c := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
		s, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}},
			&ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	slow := func(s *ldp.ClientSession, id string) string {
		reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: id, Skill: "slow", Input: json.RawMessage(`{"steps":1,"delay_ms":50}`)}, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return peerFailCode(reply)
	}
	if c := slow(open(env.Mint(nil, "mcp:slow:*")), "real"); c != "" {
		t.Fatalf("the real call: %s", c)
	}
	stranger := open(env.Mint(nil, "mcp:echo:*"))
	for i := range 5 {
		if c := slow(stranger, fmt.Sprintf("refused-%d", i)); c != "capability_not_granted" {
			t.Fatalf("refused %d: %s", i, c)
		}
	}
	card, err := (&ldp.Client{}).Discover(ctx, srv.Base)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range card.Capabilities {
		if c.Name == "slow" && (c.LatencyHintMsP50 == nil || *c.LatencyHintMsP50 < 50) {
			ms := uint64(0)
			if c.LatencyHintMsP50 != nil {
				ms = *c.LatencyHintMsP50
			}
			t.Fatalf("slow's latency hint is %d ms after one 50 ms call and five refusals", ms)
		}
	}
}

// TestLDPAttackRouteSpoofedDID (broke; fixed by the ldp helper's
// 2ab17d3, cherry-picked): a card is a claim of whoever serves it. A
// stranger serves a copy of a reputable delegate's card (its did:key, its
// ID) with a higher self-reported quality hint: ldp route gave it the
// reputable delegate's reputation, and the hint broke the tie for it. The
// stranger cannot sign as that did:key (it never answers a HELLO), which
// route now asks it to.
func TestLDPAttackRouteSpoofedDID(t *testing.T) {
	env := mcptest.NewEnv(t)
	honest := startLDPServe(t, env, "honest")
	card, err := (&ldp.Client{}).Discover(context.Background(), honest.Base)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	spoof := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		c := *card
		q := 1.0
		c.Capabilities = []ldp.Capability{{Name: "echo", QualityHint: &q}}
		b, _ := json.Marshal(&c)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	t.Cleanup(spoof.Close)
	ws := t.TempDir()
	observer := mcptest.NewKey(t, "observer").DID()
	for range 4 {
		if out, errs, code := mcptest.CLI(t, "reputation", "signal", "--workspace", ws, "--agent", card.Metadata[ldp.MetaDID], "--domain", "echo",
			"--score", "0.9", "--source", observer); code != 0 {
			t.Fatalf("signal: %s%s", out, errs)
		}
	}
	out, errs, code := mcptest.CLI(t, "ldp", "route", "--skill", "echo", "--trust-domain", "research", "--workspace", ws, honest.Base, spoof.URL)
	if code != 0 || !strings.HasPrefix(out, "→ "+honest.Base) {
		t.Fatalf("route chose the spoofer (exit %d):\n%s%s", code, out, errs)
	}
}
