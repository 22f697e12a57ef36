package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/reputation"
)

const serveLDPSection = `ldp:
  delegate_id: ldp:delegate:docs
  name: Docs delegate
  model_family: none
  model_version: docserver-1
  context_window: 8192
  trust_domain: {name: research}
  skills:
    - {name: echo, tool: echo, input_argument: text}
`

// startLDPServe runs delegateos serve as an LDP delegate in front of the
// docserver, echo priced at 100 microcents.
func startLDPServe(t *testing.T, env *mcptest.Env, name string) *mcptest.Server {
	t.Helper()
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection
	key := env.KeyFile(mcptest.NewKey(t, name))
	return env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", key}})
}

// startLDPServeRevocable starts serve with a policy of rule, extra
// (its LDP section) and a revocation list, empty, whose path it returns
// (revocation.Append revokes); the server's key is named "server".
func startLDPServeRevocable(t *testing.T, env *mcptest.Env, extra string, rule mcptest.Rule) (*mcptest.Server, string) {
	t.Helper()
	list := filepath.Join(env.Dir, "revocations.json")
	if err := os.WriteFile(list, []byte("[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := env.Policy(rule)
	pol.RevocationList = list
	pol.Extra = extra
	return env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}}), list
}

func writeToken(t *testing.T, env *mcptest.Env, name string, tok *dct.Token) string {
	t.Helper()
	path := filepath.Join(env.Dir, name)
	if err := os.WriteFile(path, []byte(tok.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeLDP: delegateos serve with an ldp section is an LDP delegate
// whose tasks the gate decides like any MCP request, through the real
// binaries: the card, a task run and charged, a task outside the token
// refused with the DelegateOS denial an MCP client gets, a budget exact
// across tasks, and a session or a task under a token its signer does not
// hold refused, as is a session without a token.
func TestServeLDP(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	agentKey := env.KeyFile(env.Agent)
	tok := writeToken(t, env, "agent.tok", env.Mint(mcptest.Budget(250), "mcp:echo:*", "docs:read:/**"))

	out, errs, code := mcptest.CLI(t, "ldp", "discover", srv.Base)
	if code != 0 || !strings.Contains(out, "ldp:delegate:docs (Docs delegate)") || !strings.Contains(out, "delegateos.capability.echo=mcp:echo:*") ||
		!strings.Contains(out, "delegateos.cost.echo=100") || !strings.Contains(out, "endpoint:      "+srv.Base+"\n") {
		t.Fatalf("discover: exit %d\n%s%s", code, out, errs)
	}
	// The A2A agent card carries the §9.1 labels.
	labels, _ := srv.Do("GET", "/.well-known/agent-card.json", nil, "").JSON()["labels"].(map[string]any)
	if labels["ldp.delegate_id"] != "ldp:delegate:docs" || labels["ldp.payload_modes"] != "semantic_frame,text" || labels["ldp.trust_domain"] != "research" {
		t.Fatalf("agent card labels %v", labels)
	}
	submit := func(extra ...string) (string, string, int) {
		args := append([]string{"ldp", "submit", "--key", agentKey, "--token", "@" + tok, "--trust-domain", "research", "--skill", "echo"}, extra...)
		return mcptest.CLI(t, append(args, srv.Base)...)
	}
	out, errs, code = submit("--input", `{"task_type":"echo","instruction":"hello ldp"}`)
	if code != 0 || !strings.Contains(out, `"text":"hello ldp"`) || !strings.Contains(out, "produced by ldp:delegate:docs (docserver-1, signed by did:key:") ||
		!strings.Contains(out, "in semantic_frame") || !strings.Contains(out, "cost charged: 100 microcents") {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	srv.WaitLog("decision", func(l map[string]any) bool { return l["tool"] == "echo" && l["allowed"] == true && l["cost"] == 100.0 })
	// The card now carries the median latency this server measured.
	out, _, _ = mcptest.CLI(t, "ldp", "discover", "--json", srv.Base)
	if !strings.Contains(out, `"latency_hint_ms_p50": `) {
		t.Fatalf("no measured latency on the card:\n%s", out)
	}

	// Narrowed to a capability the token holds but echo does not need:
	// the gate refuses it as it would refuse an MCP client.
	out, errs, code = submit("--cap", "docs:read:/**", "--input", `"x"`)
	if code != 1 || !strings.Contains(out, "task failed: capability_not_granted (policy): DCT verification failed: capability_not_granted — tool echo needs mcp:echo:*") {
		t.Fatalf("outside the token: exit %d\n%s%s", code, out, errs)
	}
	// 250 microcents: the second echo (200 spent) passes, the third is refused.
	if out, errs, code = submit("--input", `"two"`); code != 0 {
		t.Fatalf("second: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = submit("--input", `"three"`)
	if code != 1 || !strings.Contains(out, "budget_exceeded") {
		t.Fatalf("over budget: exit %d\n%s%s", code, out, errs)
	}

	// The token's holder is the agent: a TASK_SUBMIT carrying it but
	// signed by another key is refused before the gate.
	parsed, err := dct.ParseInput(strings.TrimSpace(readFile(t, tok)))
	if err != nil {
		t.Fatal(err)
	}
	thief := &ldp.Client{ID: "ldp:delegate:thief", TrustDomain: "research", Key: mcptest.NewKey(t, "thief").PrivateKey(), Verifier: &ldp.Verifier{}}
	ctx := context.Background()
	stolen := &ldp.DelegateOSMember{DCT: parsed.String(), Format: dct.Format}
	var rej *ldp.SessionRejected
	if _, err := thief.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, stolen, "", ""); !errors.As(err, &rej) || rej.Reject.Error.Code != string(ldp.ReasonWrongKey) {
		t.Fatalf("thief's session: %v", err)
	}
	// Nor can a stranger open a session without a token: sessions are
	// server state.
	if _, err := thief.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, nil, "", ""); !errors.As(err, &rej) || rej.Reject.Error.Code != "token_required" {
		t.Fatalf("no token: %v", err)
	}
	// A holder's session, then a TASK_SUBMIT carrying a token the signer
	// does not hold (another agent's) is refused before the gate.
	holder := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := holder.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, stolen, "", "")
	if err != nil {
		t.Fatal(err)
	}
	other := mcptest.NewKey(t, "other-agent")
	othersTok := env.Mint(func(p *dct.CreateParams) { p.Delegatee = other.ID() }, "mcp:echo:*")
	reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t", Skill: "echo", Input: json.RawMessage(`"not mine"`)}, ldp.ModeText,
		&ldp.DelegateOSMember{DCT: othersTok.String(), Format: dct.Format}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := reply.Body.(*ldp.TaskFailed); !ok || f.Error.Code != string(ldp.ReasonWrongKey) {
		t.Fatalf("another's token: %+v", reply.Body)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServeLDPConformance is LDP §10 against delegateos serve (the real
// binary), driven by an ldp.Client with a token for echo.
func TestServeLDPConformance(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	tok := env.Mint(nil, "mcp:echo:*")
	member := &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}
	ctx := context.Background()
	c := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	card, err := c.Discover(ctx, srv.Base) // MUST 1, with every required member (ParseCard)
	if err != nil {
		t.Fatalf("MUST 1: %v", err)
	}
	did := card.Metadata[ldp.MetaDID]
	open := func(cfg ldp.SessionConfig) *ldp.ClientSession {
		t.Helper()
		s, err := c.Open(ctx, srv.Base, card.DelegateID, cfg, member, "", did)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	result := func(reply *ldp.Envelope, err error) *ldp.TaskResult {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		r, ok := reply.Body.(*ldp.TaskResult)
		if !ok {
			t.Fatalf("%s: %+v", reply.Body.Type(), reply.Body)
		}
		return r
	}
	// MUST 2 and 3: a text task, with provenance.
	s := open(ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}})
	r := result(s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t1", Skill: "echo", Input: json.RawMessage(`"in text"`)}, "", nil, nil))
	if p := r.Provenance; p.ProducedBy != card.DelegateID || p.ModelVersion != "docserver-1" || p.PayloadModeUsed != ldp.ModeText || p.SessionID != s.ID || p.Verified {
		t.Fatalf("MUST 3: %+v", p)
	}
	// MUST 4: trust domains before SESSION_ACCEPT.
	for _, cfg := range []ldp.SessionConfig{{RequiredTrustDomain: "finance"}, {TrustDomain: "elsewhere"}} {
		if _, err := c.Open(ctx, srv.Base, card.DelegateID, cfg, nil, "", did); err == nil || !strings.Contains(err.Error(), "session rejected") {
			t.Fatalf("MUST 4 %+v: %v", cfg, err)
		}
	}
	// SHOULD 1 and 2: a frame, a frame that fails, the fallback to text.
	s = open(ldp.SessionConfig{TTLSecs: ptrU64(120)})
	if s.Payload.Mode != ldp.ModeSemanticFrame {
		t.Fatalf("SHOULD 1: %s", s.Payload.Mode)
	}
	result(s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t2", Skill: "echo", Input: json.RawMessage(`{"task_type":"echo","instruction":"framed"}`)}, "", nil, nil))
	reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t3", Skill: "echo", Input: json.RawMessage(`{"instruction":"no type"}`)}, "", nil, nil)
	if f, ok := reply.Body.(*ldp.TaskFailed); err != nil || !ok || f.Error.Code != ldp.CodeFrameInvalid || s.Payload.Mode != ldp.ModeText {
		t.Fatalf("SHOULD 2: %v %+v", err, reply)
	}
	r = result(s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t3", Skill: "echo", Input: json.RawMessage(`"no type"`)}, "", nil, nil))
	if r.Provenance.PayloadModeUsed != ldp.ModeText {
		t.Fatalf("SHOULD 2: %+v", r.Provenance)
	}
	// MUST 5: through SESSION_CLOSE; the closed session takes no task.
	if err := s.Close(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	reply, err = s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t4", Skill: "echo", Input: json.RawMessage(`"late"`)}, "", nil, nil)
	if f, ok := reply.Body.(*ldp.TaskFailed); err != nil || !ok || f.Error.Code != ldp.CodeSessionClosed {
		t.Fatalf("MUST 5: %v %+v", err, reply)
	}
	// SHOULD 3: ttl_secs is taken within bounds; beyond them the
	// SESSION_PROPOSE is refused as malformed. (Expiry itself:
	// ldp.TestSessionExpiry, with a clock.)
	if _, err := c.Open(ctx, srv.Base, card.DelegateID, ldp.SessionConfig{TTLSecs: ptrU64(10_000_000)}, nil, "", did); err == nil {
		t.Fatal("SHOULD 3: a ttl_secs past the bound was taken")
	}
	// SHOULD 4: the echo tool reports no confidence, so provenance has none
	// rather than an invented one.
	if r.Provenance.Confidence != nil {
		t.Fatalf("SHOULD 4: confidence %v from a tool that reports none", *r.Provenance.Confidence)
	}
}

func ptrU64(v uint64) *uint64 { return &v }

// TestServeLDPRouterFlow: two delegates (two delegateos serve) and a
// router on loopback: route chooses by reputation, submit hands over a
// frame the delegate refuses, falls back to text, and records the result;
// the next route counts it.
func TestServeLDPRouterFlow(t *testing.T) {
	env := mcptest.NewEnv(t)
	a, b := startLDPServe(t, env, "server-a"), startLDPServe(t, env, "server-b")
	didOf := func(s *mcptest.Server) string {
		c, err := (&ldp.Client{}).Discover(context.Background(), s.Base)
		if err != nil {
			t.Fatal(err)
		}
		return c.Metadata[ldp.MetaDID]
	}
	ws := t.TempDir()
	observer := mcptest.NewKey(t, "observer").DID()
	for range 4 {
		if out, errs, code := mcptest.CLI(t, "reputation", "signal", "--workspace", ws, "--agent", didOf(b), "--domain", "echo",
			"--score", "0.9", "--source", observer); code != 0 {
			t.Fatalf("signal: %s%s", out, errs)
		}
	}
	out, errs, code := mcptest.CLI(t, "ldp", "route", "--skill", "echo", "--trust-domain", "research", "--budget", "100", "--workspace", ws, a.Base, b.Base)
	if code != 0 || !strings.HasPrefix(out, "→ "+b.Base+" ldp:delegate:docs: rank ") || !strings.Contains(out, "(4 signals)") {
		t.Fatalf("route: exit %d\n%s%s", code, out, errs)
	}
	tok := writeToken(t, env, "agent.tok", env.Mint(nil, "mcp:echo:*"))
	out, errs, code = mcptest.CLI(t, "ldp", "submit", "--key", env.KeyFile(env.Agent), "--token", "@"+tok, "--trust-domain", "research",
		"--skill", "echo", "--input", `{"instruction":"hand over"}`, "--record", "--score", "0.8", "--source", observer, "--workspace", ws, b.Base)
	if code != 0 || !strings.Contains(out, `"text":"hand over"`) || !strings.Contains(out, "in text") ||
		!strings.Contains(out, "recorded: domain-competence echo 0.80 for "+didOf(b)) {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	out, _, _ = mcptest.CLI(t, "ldp", "route", "--skill", "echo", "--trust-domain", "research", "--workspace", ws, a.Base, b.Base)
	if !strings.Contains(out, "(5 signals)") {
		t.Fatalf("the result did not feed the reputation:\n%s", out)
	}
}

// TestServeLDPAttestation: an ATTESTATION carrying the sender's own signed
// AVP attestation becomes an RDP signal in the delegate's workspace only
// from the initiator of a task in that session, about this delegate's work
// on that task once it ended, once; one of another agent, naming no task,
// of a task the sender did not submit there, signed by someone else, or a
// second one, is refused with its own code.
func TestServeLDPAttestation(t *testing.T) {
	env := mcptest.NewEnv(t)
	ws := filepath.Join(env.Dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	// The delegate's own profile in the operator's workspace gives the
	// card's quality hint.
	serverKey := mcptest.NewKey(t, "server")
	if out, errs, code := mcptest.CLI(t, "reputation", "signal", "--workspace", ws, "--agent", serverKey.DID(), "--domain", "echo",
		"--score", "0.75", "--source", mcptest.NewKey(t, "operator").DID()); code != 0 {
		t.Fatalf("signal: %s%s", out, errs)
	}
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection + "workspace: " + ws + "\n"
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(serverKey)}})
	out, errs, code := mcptest.CLI(t, "ldp", "discover", srv.Base)
	if code != 0 || !strings.Contains(out, "capability:    echo (quality 0.75 (self-reported)") ||
		!strings.Contains(out, "delegateos.quality_source.echo=rdp (confidence") {
		t.Fatalf("quality from RDP: exit %d\n%s%s", code, out, errs)
	}
	ctx := context.Background()
	c := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	attest := func(by *identity.Keypair, to, context string) *ldp.Attestation {
		a := &reputation.Attestation{ToDID: to, Outcome: reputation.OutcomePositive, Weight: 0.8, Context: context}
		if err := reputation.SignAttestation(a, by); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(a)
		return &ldp.Attestation{Claim: b, Evidence: json.RawMessage(`{}`)}
	}
	send := func(s *ldp.ClientSession, a *ldp.Attestation) string {
		t.Helper()
		reply, err := s.Send(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if reply == nil {
			return ""
		}
		return peerFailCode(reply)
	}
	signals := func(did string) string {
		out, errs, code := mcptest.CLI(t, "reputation", "show", did, "--workspace", ws, "--json")
		if code != 0 {
			t.Fatalf("reputation show: exit %d\n%s%s", code, out, errs)
		}
		return out
	}
	task1 := "ldp:ldp:delegate:docs:task-001"
	// Before the task: nothing to attest.
	if code := send(s, attest(env.Agent, serverKey.DID(), task1)); code != ldp.CodeAttestationTask {
		t.Fatalf("before the task: %q", code)
	}
	if reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "task-001", Skill: "echo", Input: json.RawMessage(`"x"`)}, ldp.ModeText, nil, nil); err != nil {
		t.Fatal(err)
	} else if _, ok := reply.Body.(*ldp.TaskResult); !ok {
		t.Fatalf("task: %+v", reply.Body)
	}
	// Of another agent, naming no task, two at once, another's signature.
	subject := mcptest.NewKey(t, "subject").DID()
	if code := send(s, attest(env.Agent, subject, task1)); code != ldp.CodeAttestationSubject {
		t.Fatalf("of another agent: %q", code)
	}
	if code := send(s, attest(env.Agent, serverKey.DID(), "ldp:task-001")); code != ldp.CodeAttestationSubject {
		t.Fatalf("naming no task of this delegate: %q", code)
	}
	one := attest(env.Agent, serverKey.DID(), task1).Claim
	two := &ldp.Attestation{Claim: json.RawMessage("[" + string(one) + "," + string(one) + "]"), Evidence: json.RawMessage(`{}`)}
	if code := send(s, two); code != "ATTESTATION_INVALID" {
		t.Fatalf("two at once: %q", code)
	}
	if code := send(s, attest(mcptest.NewKey(t, "other"), serverKey.DID(), task1)); code != string(ldp.ReasonWrongKey) {
		t.Fatalf("another's attestation: %q", code)
	}
	// Another token holder, in its own session, of the router's task.
	otherAgent := mcptest.NewKey(t, "other-agent")
	oc := &ldp.Client{ID: "ldp:delegate:other", TrustDomain: "research", Key: otherAgent.PrivateKey(), Verifier: &ldp.Verifier{}}
	os2, err := oc.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: env.Mint(func(p *dct.CreateParams) { p.Delegatee = otherAgent.ID() }, "docs:read:/**").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if code := send(os2, attest(otherAgent, serverKey.DID(), task1)); code != ldp.CodeAttestationTask {
		t.Fatalf("another holder's attestation of the router's task: %q", code)
	}
	if strings.Contains(signals(serverKey.DID()), `"signals": 2`) || strings.Contains(signals(subject), `"signals": 1`) {
		t.Fatal("a refused attestation was recorded")
	}
	// The initiator's own, of its task: recorded, once.
	if code := send(s, attest(env.Agent, serverKey.DID(), task1)); code != "" {
		t.Fatalf("the initiator's attestation: %q", code)
	}
	if out := signals(serverKey.DID()); !strings.Contains(out, `"signals": 2`) {
		t.Fatalf("not recorded:\n%s", out)
	}
	if code := send(s, attest(env.Agent, serverKey.DID(), task1)); code != ldp.CodeAttestationRepeated {
		t.Fatalf("again: %q", code)
	}
}

// TestServeLDPHMAC: a peer of the reference SDKs, signing with the shared
// secret (hmac_secret_file), uses a delegate whose policy allows calls
// without a token; with another secret it is refused. (Under a token, a
// task needs an Ed25519 signature by the token's holder: TestServeLDP.)
func TestServeLDPHMAC(t *testing.T) {
	env := mcptest.NewEnv(t)
	secretFile := filepath.Join(env.Dir, "ldp.secret")
	if err := os.WriteFile(secretFile, []byte("a shared secret of the reference\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := env.Policy(mcptest.Priced("echo", 0))
	pol.AllowUnauthenticated = true
	pol.Extra = strings.Replace(serveLDPSection, "  skills:", "  hmac_secret_file: "+secretFile+"\n  skills:", 1)
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	ctx := context.Background()
	peer := &ldp.Client{ID: "ldp:delegate:py", TrustDomain: "research", HMACSecret: "a shared secret of the reference",
		Verifier: &ldp.Verifier{HMACSecret: "a shared secret of the reference"}}
	s, err := peer.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t", Skill: "echo", Input: json.RawMessage(`"hmac"`)}, ldp.ModeText, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reply.Body.(*ldp.TaskResult); !ok || reply.SignatureAlgorithm != ldp.AlgHMACSHA256 {
		t.Fatalf("%s %+v", reply.SignatureAlgorithm, reply.Body)
	}
	wrong := &ldp.Client{ID: "ldp:delegate:py", TrustDomain: "research", HMACSecret: "not the shared secret at all"}
	if _, err := wrong.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, nil, "", ""); err == nil || !strings.Contains(err.Error(), string(ldp.ReasonTampered)) {
		t.Fatalf("another secret: %v", err)
	}
}

// TestServeLDPVerified: a skill with a DelegateOS task contract gives
// verified: true only when the contract's verification ran on the result
// and passed; a result that fails it is refused (TASK_FAILED), never
// passed on as unverified.
func TestServeLDPVerified(t *testing.T) {
	env := mcptest.NewEnv(t)
	rootKey := env.KeyFile(env.Root)
	contractFile := func(id, field string) string {
		path := filepath.Join(env.Dir, id+".json")
		if out, errs, code := mcptest.CLI(t, "contract", "create", "--key", rootKey, "--id", id, "--title", "echo back",
			"--output-schema", `{"type": "object", "required": ["content"]}`,
			"--verification", `{"method": "deterministic_check", "checkName": "field_exists", "checkParams": {"fields": ["`+field+`"]}}`,
			"--budget", "1000", "--ttl", "1h", "--out", path); code != 0 {
			t.Fatalf("contract create: %s%s", out, errs)
		}
		return path
	}
	pol := env.Policy(mcptest.Priced("echo", 0))
	pol.Extra = strings.Replace(serveLDPSection, "    - {name: echo, tool: echo, input_argument: text}\n",
		"    - {name: echo, tool: echo, input_argument: text, contract: "+contractFile("ct_00000000000a", "content")+"}\n"+
			"    - {name: strict, tool: echo, input_argument: text, contract: "+contractFile("ct_00000000000b", "summary")+"}\n", 1)
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	tok := writeToken(t, env, "agent.tok", env.Mint(nil, "mcp:echo:*"))
	agentKey := env.KeyFile(env.Agent)
	submit := func(skill string) (string, string, int) {
		return mcptest.CLI(t, "ldp", "submit", "--key", agentKey, "--token", "@"+tok, "--trust-domain", "research",
			"--skill", skill, "--input", `"check me"`, srv.Base)
	}
	out, errs, code := submit("echo")
	if code != 0 || !strings.Contains(out, "result verified (tool_verified)") {
		t.Fatalf("verified: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = submit("strict")
	if code != 1 || !strings.Contains(out, "task failed: VERIFICATION_FAILED (quality): the result fails contract ct_00000000000b's verification") {
		t.Fatalf("failing verification: exit %d\n%s%s", code, out, errs)
	}
}
