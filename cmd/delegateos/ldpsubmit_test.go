package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// gateLike stands in for the gate behind an LDP delegate: it verifies the
// task's token for the resource the task reads, holds the TASK_SUBMIT's
// signer to the token's delegatee (as the gate holds an AVP-Sig signer),
// and remembers the scope it granted.
type gateLike struct {
	verifier *dct.Verifier
	// lazyRoot, when set, is the key file of the root to trust, read at
	// the first task (a page's commands make it after the delegate starts).
	lazyRoot string
	resource string
	verified bool
	mu       sync.Mutex
	scopes   []*dct.AuthorizedScope
	modes    []ldp.PayloadMode
}

// The test's goroutine and the delegate's handlers share a gateLike; the
// binary between them orders their accesses in a way the race detector
// cannot see, so every field is read and written under mu.
func (g *gateLike) setVerified(v bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.verified = v
}

func (g *gateLike) ran() []*dct.AuthorizedScope {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*dct.AuthorizedScope(nil), g.scopes...)
}

func (g *gateLike) sawModes() []ldp.PayloadMode {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]ldp.PayloadMode(nil), g.modes...)
}

func (g *gateLike) Execute(_ context.Context, t *ldp.Task) (*ldp.Outcome, error) {
	g.mu.Lock()
	g.modes = append(g.modes, t.Mode)
	if g.lazyRoot != "" {
		root, err := identity.LoadKeyFile(g.lazyRoot)
		if err != nil {
			g.mu.Unlock()
			return nil, err
		}
		if g.verifier, err = dct.NewVerifier(dct.Options{Roots: []string{root.ID()}}); err != nil {
			g.mu.Unlock()
			return nil, err
		}
		g.lazyRoot = ""
	}
	g.mu.Unlock()
	if t.Token == nil || t.Token.Format != dct.Format {
		return nil, &ldp.TaskError{LdpError: ldp.LdpError{Code: "malformed_token", Category: "policy", Severity: "error", Message: "no token"}}
	}
	g.mu.Lock()
	verifier := g.verifier
	g.mu.Unlock()
	scope, err := verifier.Verify(t.Token.DCT, dct.Request{Namespace: "docs", Action: "read", Resource: g.resource})
	if err != nil {
		var d *dct.Denial
		code := "invalid_token"
		if errors.As(err, &d) {
			code = string(d.Type)
		}
		return nil, &ldp.TaskError{LdpError: ldp.LdpError{Code: code, Category: "policy", Severity: "error", Message: err.Error()}}
	}
	signer, _ := identity.PrincipalIDFromDID(t.By.Signer)
	if signer != scope.Delegatee {
		return nil, &ldp.TaskError{LdpError: ldp.LdpError{Code: "signature_wrong_key", Category: "security", Severity: "fatal", Message: "not the token's delegatee"}}
	}
	g.mu.Lock()
	g.scopes = append(g.scopes, scope)
	g.mu.Unlock()
	out, _ := json.Marshal(map[string]any{"summary": "Q3 was fine", "input": json.RawMessage(t.Submit.Input)})
	o := &ldp.Outcome{Output: out}
	g.mu.Lock()
	verified := g.verified
	g.mu.Unlock()
	if verified {
		o.Verified, o.VerificationStatus = true, "tool_verified"
	}
	return o, nil
}

type ldpDelegateFixture struct {
	url  string
	gate *gateLike
	did  string
}

// ldpDelegate serves a Responder backed by gateLike; card edits its card.
func ldpDelegate(t *testing.T, root *identity.Keypair, modes []ldp.PayloadMode, card func(*ldp.IdentityCard)) *ldpDelegateFixture {
	t.Helper()
	v, err := dct.NewVerifier(dct.Options{Roots: []string{root.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	key := mcptest.NewKey(t, "delegate")
	g := &gateLike{verifier: v, resource: "/reports/q3.md"}
	r := &ldp.Responder{Exec: g, Key: key.PrivateKey(), Verifier: &ldp.Verifier{}}
	// The card is set before the server starts serving: the binary's
	// requests come from another process, which the race detector cannot
	// see order after this goroutine's writes.
	srv := httptest.NewUnstartedServer(&ldp.Handler{Responder: r})
	url := "http://" + srv.Listener.Addr().String()
	did := identity.DIDFromPublicKey(key.PrivateKey().Public().(ed25519.PublicKey))
	r.Card = &ldp.IdentityCard{DelegateID: "ldp:delegate:reports", Name: "Reports", ModelFamily: "none", ModelVersion: "1",
		TrustDomain: ldp.TrustDomain{Name: "research"}, ContextWindow: 8192,
		Capabilities: []ldp.Capability{{Name: "summarize"}}, SupportedPayloadModes: modes, Endpoint: url,
		Metadata: map[string]string{ldp.MetaDID: did, ldp.MetaCapabilityPrefix + "summarize": "docs:read:/reports/**"}}
	if card != nil {
		card(r.Card)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return &ldpDelegateFixture{url: srv.URL, gate: g, did: did}
}

// TestLDPSubmit hands a task to a delegate through the real binary: the
// token goes narrowed to the skill's capability, the budget and a short
// expiry, still held by the initiator (who signs), with no further
// delegation; the result is checked and printed; a frame the delegate
// cannot take falls back to text; the outcome feeds reputation.
func TestLDPSubmit(t *testing.T) {
	env := mcptest.NewEnv(t)
	tok := env.Mint(nil, "docs:read:/**", "docs:write:/**")
	tokFile := filepath.Join(env.Dir, "agent.tok")
	os.WriteFile(tokFile, []byte(tok.String()), 0o600)
	agentKey := env.KeyFile(env.Agent)
	d := ldpDelegate(t, env.Root, []ldp.PayloadMode{ldp.ModeSemanticFrame, ldp.ModeText}, nil)
	d.gate.setVerified(true)
	ws := t.TempDir()
	observer := identity.DIDFromPublicKey(env.Root.Public())

	out, errs, code := mcptest.CLI(t, "ldp", "submit", "--key", agentKey, "--token", "@"+tokFile, "--skill", "summarize",
		"--input", `{"task_type":"summary","instruction":"Summarize Q3"}`, "--budget", "5000", "--ttl", "5m",
		"--record", "--score", "0.9", "--source", observer, "--workspace", ws, "--trust-domain", "research", d.url)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{`"summary":"Q3 was fine"`, "produced by ldp:delegate:reports (1, signed by " + d.did + ") in semantic_frame",
		"result verified (tool_verified)", "recorded: domain-competence summarize 0.90 for " + d.did} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	scopes := d.gate.ran()
	if len(scopes) != 1 {
		t.Fatalf("%d tasks ran", len(scopes))
	}
	sc := scopes[0]
	if len(sc.Capabilities) != 1 || sc.Capabilities[0].String() != "docs:read:/reports/**" || sc.RemainingBudgetMicrocents != 5000 ||
		sc.Delegatee != env.Agent.ID() || sc.MaxChainDepth != sc.ChainDepth {
		t.Fatalf("the token was not narrowed: %+v", sc)
	}
	if exp, _ := time.Parse(time.RFC3339, sc.ExpiresAt); exp.After(time.Now().Add(5*time.Minute)) || exp.Before(time.Now().Add(4*time.Minute)) {
		t.Fatalf("expiry %s, want in about 5 minutes", sc.ExpiresAt)
	}
	show, errs, code := mcptest.CLI(t, "reputation", "show", d.did, "--workspace", ws, "--json")
	if code != 0 || !strings.Contains(show, `"summarize"`) {
		t.Fatalf("reputation show: exit %d\n%s%s", code, show, errs)
	}

	// A frame the delegate refuses (no task_type): the session falls back
	// to text and the task goes again as its instruction.
	d.gate.setVerified(false)
	out, errs, code = mcptest.CLI(t, "ldp", "submit", "--key", agentKey, "--token", "@"+tokFile, "--skill", "summarize",
		"--input", `{"instruction":"Summarize Q3"}`, "--trust-domain", "research", "--record", "--source", observer, "--workspace", ws, d.url)
	if code != 0 || !strings.Contains(out, `"input":"Summarize Q3"`) || !strings.Contains(out, "in text") ||
		!strings.Contains(out, "not recorded: an unverified result") {
		t.Fatalf("fallback: exit %d\n%s%s", code, out, errs)
	}
	if m := d.gate.sawModes(); len(m) != 2 || m[1] != ldp.ModeText {
		t.Fatalf("modes %v (the invalid frame must not reach the executor)", m)
	}
}

// TestLDPSubmitRefusals: a task the narrowed token does not cover is
// refused by the delegate with the DelegateOS denial; a card without a
// did:key, or whose replies another key signs, is not trusted; the
// observer cannot be the delegate.
func TestLDPSubmitRefusals(t *testing.T) {
	env := mcptest.NewEnv(t)
	tok := env.Mint(nil, "docs:read:/**")
	tokFile := filepath.Join(env.Dir, "agent.tok")
	os.WriteFile(tokFile, []byte(tok.String()), 0o600)
	agentKey := env.KeyFile(env.Agent)
	submit := func(url string, extra ...string) (string, string, int) {
		args := append([]string{"ldp", "submit", "--key", agentKey, "--token", "@" + tokFile, "--skill", "summarize",
			"--input", `{"task_type":"summary","instruction":"x"}`, "--trust-domain", "research"}, extra...)
		return mcptest.CLI(t, append(args, url)...)
	}

	// The card says the skill needs /public/**, but the task reads /reports.
	d := ldpDelegate(t, env.Root, []ldp.PayloadMode{ldp.ModeText}, func(c *ldp.IdentityCard) {
		c.Metadata[ldp.MetaCapabilityPrefix+"summarize"] = "docs:read:/public/**"
	})
	out, errs, code := submit(d.url)
	if code != 1 || !strings.Contains(out, "task failed: capability_not_granted (policy)") {
		t.Fatalf("outside the token: exit %d\n%s%s", code, out, errs)
	}
	// A capability the token never had cannot be narrowed to.
	_, errs, code = submit(d.url, "--cap", "docs:write:/reports/**")
	if code != 2 || !strings.Contains(errs, "narrowing the token for the task") {
		t.Fatalf("wider cap: exit %d\n%s", code, errs)
	}
	// Over the token's budget.
	_, errs, code = submit(d.url, "--budget", "999999999")
	if code != 2 || !strings.Contains(errs, "budget") {
		t.Fatalf("budget: exit %d\n%s", code, errs)
	}

	noDID := ldpDelegate(t, env.Root, []ldp.PayloadMode{ldp.ModeText}, func(c *ldp.IdentityCard) { delete(c.Metadata, ldp.MetaDID) })
	if _, errs, code = submit(noDID.url); code != 1 || !strings.Contains(errs, "names no valid did:key") {
		t.Fatalf("no did: exit %d\n%s", code, errs)
	}
	other := identity.DIDFromPublicKey(mcptest.NewKey(t, "impostor").Public())
	lying := ldpDelegate(t, env.Root, []ldp.PayloadMode{ldp.ModeText}, func(c *ldp.IdentityCard) { c.Metadata[ldp.MetaDID] = other })
	if _, errs, code = submit(lying.url); code != 1 || !strings.Contains(errs, string(ldp.ReasonWrongKey)) {
		t.Fatalf("replies signed by another key: exit %d\n%s", code, errs)
	}
	if len(lying.gate.ran()) != 0 {
		t.Fatal("a task went to a delegate whose key does not match its card")
	}
	good := ldpDelegate(t, env.Root, []ldp.PayloadMode{ldp.ModeText}, nil)
	if _, errs, code = submit(good.url, "--record", "--source", good.did, "--workspace", t.TempDir()); code != 2 || !strings.Contains(errs, "self-dealing") {
		t.Fatalf("self-rating: exit %d\n%s", code, errs)
	}
}
