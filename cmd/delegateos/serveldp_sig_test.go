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
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/ldp"
)

// ldpHMACSecret is the shared secret of the HMAC peers of these tests.
const ldpHMACSecret = "a shared secret of 32 characters"

// mcpDenial is the message serve answers a stateless MCP tools/call of
// echo with, sent with bearer (none when empty) and no AVP-Sig.
func mcpDenial(t *testing.T, srv *mcptest.Server, bearer string) (int, string) {
	t.Helper()
	hdr := map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
	if bearer != "" {
		hdr["Authorization"] = "Bearer " + bearer
	}
	res := srv.Do(http.MethodPost, "/mcp", hdr, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	var m struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal(res.Body, &m)
	return res.Status, m.Error.Message
}

// TestServeLDPRequireSignature: under require_signature (holder-of-key),
// an LDP task whose TASK_SUBMIT its token's holder signed with Ed25519
// over the whole envelope runs, as an AVP-signed MCP call does; that
// signature binds the task: the same bytes again are a replay, the same
// bytes at another delegate with the same ID are outside any session of
// the holder there, and a stale one is refused. A task with the HMAC (a
// token in its envelope or none) is refused with the denial an MCP client
// without a signature gets, with the same token.
func TestServeLDPRequireSignature(t *testing.T) {
	env := mcptest.NewEnv(t)
	start := func(name string, unauthenticated bool) *mcptest.Server {
		pol := env.Policy(mcptest.Priced("echo", 100))
		pol.AllowUnauthenticated = unauthenticated
		pol.Extra = serveLDPSection + "  hmac_secret: \"" + ldpHMACSecret + "\"\nrequire_signature: true\n"
		return env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, name))}})
	}
	a, b := start("a", false), start("b", false)
	agentKey := env.KeyFile(env.Agent)
	tok := env.Mint(nil, "mcp:echo:*")
	tokFile := writeToken(t, env, "agent.tok", tok)

	// The CLI's task runs.
	out, errs, code := mcptest.CLI(t, "ldp", "submit", "--key", agentKey, "--token", "@"+tokFile, "--trust-domain", "research",
		"--skill", "echo", "--input", `"holder proven"`, a.Base)
	if code != 0 || !strings.Contains(out, `"text":"holder proven"`) || !strings.Contains(out, "cost charged: 100 microcents") {
		t.Fatalf("submit under require_signature: exit %d\n%s%s", code, out, errs)
	}

	ctx := context.Background()
	member := &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}
	holder := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	text := ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}}
	sa, err := holder.Open(ctx, a.Base, "ldp:delegate:docs", text, member, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Open(ctx, b.Base, "ldp:delegate:docs", text, member, "", ""); err != nil {
		t.Fatal(err)
	}
	good := peerSign(t, peerEnvelope(sa.ID, holder.ID, &ldp.TaskSubmit{TaskID: "t1", Skill: "echo", Input: json.RawMessage(`"once"`)}, ldp.ModeText), env.Agent.PrivateKey())
	if _, reply, body := peerPost(t, a, "", good, ""); peerFailCode(reply) != "" {
		t.Fatalf("the holder's task: %s", body)
	}
	if _, reply, body := peerPost(t, a, "", good, ""); peerFailCode(reply) != string(ldp.ReasonReplayed) {
		t.Fatalf("replayed: %s", body)
	}
	// Another delegate with the same ID: the session the signature names
	// is a's, which b never opened.
	if _, reply, body := peerPost(t, b, "", good, ""); peerFailCode(reply) != ldp.CodeSessionUnknown {
		t.Fatalf("replayed to another delegate: %s", body)
	}
	stale := peerEnvelope(sa.ID, holder.ID, &ldp.TaskSubmit{TaskID: "t2", Skill: "echo", Input: json.RawMessage(`"late"`)}, ldp.ModeText)
	stale.Timestamp = timestamp.Format(time.Now().Add(-2 * time.Minute))
	if _, reply, body := peerPost(t, a, "", peerSign(t, stale, env.Agent.PrivateKey()), ""); peerFailCode(reply) != string(ldp.ReasonStale) {
		t.Fatalf("stale: %s", body)
	}
	// Signed by another key: not the holder.
	other := mcptest.NewKey(t, "other")
	forged := peerEnvelope(sa.ID, holder.ID, &ldp.TaskSubmit{TaskID: "t3", Skill: "echo", Input: json.RawMessage(`"x"`)}, ldp.ModeText)
	if _, reply, body := peerPost(t, a, "", peerSign(t, forged, other.PrivateKey()), ""); peerFailCode(reply) == "" {
		t.Fatalf("another key: %s", body)
	}
	peerAllowed(t, a, "echo", 2)

	// A delegate that takes calls without a token, and HMAC peers: their
	// tasks are refused with the MCP client's denial.
	open := start("open", true)
	peer := &ldp.Client{ID: "ldp:delegate:peer", TrustDomain: "research", HMACSecret: ldpHMACSecret, Verifier: &ldp.Verifier{HMACSecret: ldpHMACSecret}}
	sp, err := peer.Open(ctx, open.Base, "ldp:delegate:docs", text, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		token *ldp.DelegateOSMember
	}{{"no token", nil}, {"a token", member}} {
		reply, err := sp.Submit(ctx, &ldp.TaskSubmit{TaskID: "hmac-" + strings.ReplaceAll(c.name, " ", "-"), Skill: "echo", Input: json.RawMessage(`"x"`)}, ldp.ModeText, c.token, nil)
		if err != nil {
			t.Fatal(err)
		}
		bearer := ""
		if c.token != nil {
			bearer = c.token.DCT
		}
		status, want := mcpDenial(t, open, bearer)
		f, ok := reply.Body.(*ldp.TaskFailed)
		if status != http.StatusUnauthorized || !strings.HasPrefix(want, "signature_missing: ") || !ok ||
			f.Error.Code != "signature_missing" || f.Error.Category != "security" || f.Error.Message != want {
			t.Fatalf("HMAC task with %s: %+v\nMCP client: %d %q", c.name, reply.Body, status, want)
		}
	}
	if n := len(open.LogWith("decision", func(l map[string]any) bool { return l["tool"] == "echo" })); n != 0 {
		t.Fatalf("the gate decided %d unsigned calls", n)
	}
}
