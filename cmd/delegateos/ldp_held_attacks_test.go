package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/revocation"
	"github.com/delegateos/delegateos/serve/ldpfront"
)

// Attacks of the third LDP red team (rtldp3, issue 21) that HOLD: each
// test says what was tried.

// TestLDPApprovalAnswerBindsOneTask: an approver's signed answer decides
// one waiting task, once. Tried: the answer for task A sent again (404),
// A's answer with B's approval ID put in (the signature fails, 401), a
// stale answer for B (401), an answer by a key that is not an approver
// for B (403); B is then cancelled by its initiator (TASK_CANCEL): it
// ends TASK_CANCELLED, its approval is gone (404), nothing is charged for
// it; exactly one echo ran.
func TestLDPApprovalAnswerBindsOneTask(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := peerApprovalServe(t, env, approver, "required", "")
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	replyA := peerSubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "a", Skill: "echo", Input: json.RawMessage(`"a"`)})
	replyB := peerSubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "b", Skill: "echo", Input: json.RawMessage(`"b"`)})
	ids := peerAwaiting(t, srv, 2)
	post := func(a *ldpfront.Approval) int {
		t.Helper()
		b, _ := json.Marshal(a)
		return srv.Do(http.MethodPost, ldpfront.ApprovalsPath, nil, string(b)).Status
	}
	sign := func(id string, at time.Time) *ldpfront.Approval {
		a := &ldpfront.Approval{ApprovalID: id, Approve: true}
		if err := a.Sign(approver.PrivateKey(), at); err != nil {
			t.Fatal(err)
		}
		return a
	}
	forA := sign(ids["a"], time.Now())
	if st := post(forA); st != http.StatusOK {
		t.Fatalf("the approver's answer: %d", st)
	}
	if r := <-replyA; peerFailCode(r) != "" {
		t.Fatalf("the approved task: %+v", r.Body)
	}
	if st := post(forA); st != http.StatusNotFound {
		t.Fatalf("the same answer again: %d", st)
	}
	moved := *forA
	moved.ApprovalID = ids["b"]
	if st := post(&moved); st != http.StatusUnauthorized {
		t.Fatalf("A's answer given B's ID: %d", st)
	}
	if st := post(sign(ids["b"], time.Now().Add(-2*time.Minute))); st != http.StatusUnauthorized {
		t.Fatalf("a stale answer: %d", st)
	}
	stranger := &ldpfront.Approval{ApprovalID: ids["b"], Approve: true}
	stranger.Sign(mcptest.NewKey(t, "stranger").PrivateKey(), time.Now())
	if st := post(stranger); st != http.StatusForbidden {
		t.Fatalf("not an approver: %d", st)
	}
	if code := peerSend(t, s, &ldp.TaskCancel{TaskID: "b"}); code != "" {
		t.Fatalf("cancel: %q", code)
	}
	if r := <-replyB; peerFailCode(r) != "TASK_CANCELLED" {
		t.Fatalf("the cancelled task: %+v", r.Body)
	}
	if st := post(sign(ids["b"], time.Now())); st != http.StatusNotFound {
		t.Fatalf("an answer after the cancel: %d", st)
	}
	ran := func() int {
		return len(srv.LogWith("decision", func(l map[string]any) bool {
			return l["tool"] == "echo" && l["allowed"] == true && l["outcome"] == "result"
		}))
	}
	mcptest.Eventually(t, "the approved call logged", func() bool { return ran() >= 1 })
	if n := ran(); n != 1 {
		t.Fatalf("%d echo calls ran, want 1", n)
	}
}

// TestLDPSignedTaskHolderOfKeyRefusals: under require_signature, what a
// holder's Ed25519 signature proves is held to the token the task runs
// under. Tried: the holder signs a task carrying another agent's token
// (signature_wrong_key); the holder signs a task with no member while the
// bearer is another agent's token (BEARER_UNSIGNED: a bearer is taken
// only when it is the signed token); the holder signs
// a task, its token is revoked, then the never-sent bytes are sent
// (revoked, not run); the gate allowed exactly the one good task.
func TestLDPSignedTaskHolderOfKeyRefusals(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv, list := startLDPServeRevocable(t, env, peerSection+"require_signature: true\n", mcptest.Priced("echo", 100))
	tok := env.Mint(nil, "mcp:echo:*")
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, tok)
	if r := peerSubmit(t, s, "good", "echo", `"ok"`, nil); peerFailCode(r) != "" {
		t.Fatalf("the holder's task: %+v", r.Body)
	}
	other := mcptest.NewKey(t, "other")
	othersTok := env.Mint(func(p *dct.CreateParams) { p.Delegatee = other.ID() }, "mcp:echo:*")
	e := peerEnvelope(s.ID, "ldp:delegate:holder", &ldp.TaskSubmit{TaskID: "member", Skill: "echo", Input: json.RawMessage(`"x"`)}, ldp.ModeText)
	e.DelegateOS = &ldp.DelegateOSMember{DCT: othersTok.String(), Format: dct.Format}
	if _, r, body := peerPost(t, srv, "", peerSign(t, e, env.Agent.PrivateKey()), ""); peerFailCode(r) != string(ldp.ReasonWrongKey) {
		t.Fatalf("another's token as the member: %s", body)
	}
	e = peerEnvelope(s.ID, "ldp:delegate:holder", &ldp.TaskSubmit{TaskID: "bearer", Skill: "echo", Input: json.RawMessage(`"x"`)}, ldp.ModeText)
	if _, r, body := peerPost(t, srv, "", peerSign(t, e, env.Agent.PrivateKey()), othersTok.String()); peerFailCode(r) != ldp.CodeBearerUnsigned {
		t.Fatalf("another's token as the bearer: %s", body)
	}
	later := peerSign(t, peerEnvelope(s.ID, "ldp:delegate:holder", &ldp.TaskSubmit{TaskID: "later", Skill: "echo", Input: json.RawMessage(`"x"`)}, ldp.ModeText), env.Agent.PrivateKey())
	rev, err := revocation.NewEntry(env.Root, tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := revocation.Append(list, rev); err != nil {
		t.Fatal(err)
	}
	probe := &ldp.Client{ID: "ldp:delegate:probe", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	mcptest.Eventually(t, "the revocation taken", func() bool {
		_, err := probe.Open(context.Background(), srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}, "", "")
		return err != nil
	})
	if _, r, body := peerPost(t, srv, "", later, ""); peerFailCode(r) != "revoked" {
		t.Fatalf("signed before the revocation, sent after: %s", body)
	}
	if n := peerAllowed(t, srv, "echo", 1); n != 1 {
		t.Fatalf("%d calls allowed", n)
	}
}

// TestLDPAttestationOnlyInItsSession: attestations reach the workspace
// only from the task's initiator in the task's session. Tried: the
// delegate's own key, holding a token, runs a task and attests itself
// (refused: an agent does not attest itself); the same holder opens a
// second session under another peer ID with the same token and attests
// the first session's task there (ATTESTATION_TASK_UNKNOWN); the
// initiator closes its session and then attests (refused: no session);
// the same AVP attestation carried for a task of the same ID in a second
// session counts once. One signal in all.
func TestLDPAttestationOnlyInItsSession(t *testing.T) {
	env := mcptest.NewEnv(t)
	serverKey := mcptest.NewKey(t, "server")
	srv, ws := peerServe(t, env, serverKey, "")
	self := peerOpen(t, srv, "ldp:delegate:self", serverKey, env.Mint(func(p *dct.CreateParams) { p.Delegatee = serverKey.ID() }, "mcp:echo:*"))
	if r := peerSubmit(t, self, "own", "echo", `"x"`, nil); peerFailCode(r) != "" {
		t.Fatalf("own task: %+v", r.Body)
	}
	selfAtt := &ldp.Attestation{Claim: json.RawMessage(`{"from_did":"` + serverKey.DID() + `","to_did":"` + serverKey.DID() +
		`","outcome":"positive","weight":1,"context":"ldp:ldp:delegate:docs:own","signature":"` + strings.Repeat("00", 64) + `"}`), Evidence: json.RawMessage(`{}`)}
	if code := peerSend(t, self, selfAtt); code == "" {
		t.Fatal("the delegate attested itself")
	}
	tok := env.Mint(nil, "mcp:echo:*")
	a := peerOpen(t, srv, "ldp:delegate:a", env.Agent, tok)
	b := peerOpen(t, srv, "ldp:delegate:b", env.Agent, tok)
	if r := peerSubmit(t, a, "t1", "echo", `"x"`, nil); peerFailCode(r) != "" {
		t.Fatalf("task: %+v", r.Body)
	}
	att := peerAttestation(t, env.Agent, serverKey.DID(), "t1", true)
	if code := peerSend(t, b, att); code != ldp.CodeAttestationTask {
		t.Fatalf("attested from another session of the same holder: %q", code)
	}
	if r := peerSubmit(t, b, "t1", "echo", `"y"`, nil); peerFailCode(r) != "" {
		t.Fatalf("task: %+v", r.Body)
	}
	if code := peerSend(t, a, att); code != "" {
		t.Fatalf("the initiator's attestation: %q", code)
	}
	// The same AVP attestation (same signature) for b's task t1: taken,
	// but the workspace holds it once.
	if code := peerSend(t, b, att); code != "" {
		t.Fatalf("the same attestation in the other session: %q", code)
	}
	if err := a.Close(context.Background(), "done"); err != nil {
		t.Fatal(err)
	}
	if r := peerSubmit(t, b, "t2", "echo", `"z"`, nil); peerFailCode(r) != "" {
		t.Fatalf("task: %+v", r.Body)
	}
	e := peerEnvelope(a.ID, "ldp:delegate:a", peerAttestation(t, env.Agent, serverKey.DID(), "t1", false), ldp.ModeText)
	if _, r, body := peerPost(t, srv, "", peerSign(t, e, env.Agent.PrivateKey()), ""); peerFailCode(r) == "" {
		t.Fatalf("an attestation in a closed session: %s", body)
	}
	if n := peerSignals(t, ws, serverKey.DID()); n != 1 {
		t.Fatalf("%d signals, want 1", n)
	}
}

// TestLDPApprovalTimeoutEndsTheWait: a task whose approval times out (the
// rule's timeout, 1 s) ends approval_declined, its place is given back
// (an answer after it is 404) and nothing ran.
func TestLDPApprovalTimeoutEndsTheWait(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := peerApprovalServe(t, env, approver, "{required: true, timeout: 1s}", "")
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	reply := peerSubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "late", Skill: "echo", Input: json.RawMessage(`"x"`)})
	id := peerAwaiting(t, srv, 1)["late"]
	if r := <-reply; peerFailCode(r) != "approval_declined" {
		t.Fatalf("timed out: %+v", r.Body)
	}
	if code, out := peerApprove(t, env, srv, approver, id); code == 0 || !strings.Contains(out, "no task is waiting") {
		t.Fatalf("an answer after the timeout: exit %d %s", code, out)
	}
	if n := len(srv.LogWith("decision", func(l map[string]any) bool { return l["tool"] == "echo" && l["outcome"] == "result" })); n != 0 {
		t.Fatalf("%d calls ran", n)
	}
}

// TestLDPApprovalRevokedWhileWaiting: the token is revoked while its task
// waits for approval; once approved, the call sent back is refused by the
// endpoint (401) and the task fails invalid_token, category security,
// with a message saying "revoked" — not the revoked/policy denial a task
// under a revoked token gets otherwise (TestLDPAttackRevokedMidSession).
// The task did not run (that held); the code was wrong (BROKE, minor):
// fixed, the token is checked again after the wait, so the task fails
// revoked/policy.
func TestLDPApprovalRevokedWhileWaiting(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	rule := mcptest.Priced("echo", 100)
	rule.Approval = "required"
	srv, list := startLDPServeRevocable(t, env, strings.Replace(peerSection, "  skills:", "  approvers: ["+approver.DID()+"]\n  skills:", 1), rule)
	tok := env.Mint(nil, "mcp:echo:*")
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, tok)
	reply := peerSubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "c", Skill: "echo", Input: json.RawMessage(`"x"`)})
	id := peerAwaiting(t, srv, 1)["c"]
	e, err := revocation.NewEntry(env.Root, tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := revocation.Append(list, e); err != nil {
		t.Fatal(err)
	}
	probe := &ldp.Client{ID: "ldp:delegate:probe", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	mcptest.Eventually(t, "the revocation taken", func() bool {
		_, err := probe.Open(context.Background(), srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}, "", "")
		return err != nil
	})
	if code, out := peerApprove(t, env, srv, approver, id); code != 0 {
		t.Fatalf("approve: %s", out)
	}
	got := <-reply
	f, ok := got.Body.(*ldp.TaskFailed)
	if !ok {
		t.Fatalf("a task of a revoked token ran: %s", got.Body.Type())
	}
	if f.Error.Code != "revoked" || f.Error.Category != ldp.CategoryPolicy {
		t.Fatalf("revoked while waiting: %s/%s (%s), want revoked/policy as for any task of a revoked token", f.Error.Code, f.Error.Category, f.Error.Message)
	}
}
