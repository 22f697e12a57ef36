package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
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
func startLDPServe(t *testing.T, env *mcptest.Env) *mcptest.Server {
	t.Helper()
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection
	key := env.KeyFile(mcptest.NewKey(t, "server"))
	return env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", key}})
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
// across tasks, and a TASK_SUBMIT signed by someone other than the
// token's holder refused.
func TestServeLDP(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env)
	agentKey := env.KeyFile(env.Agent)
	tok := writeToken(t, env, "agent.tok", env.Mint(mcptest.Budget(250), "mcp:echo:*", "docs:read:/**"))

	out, errs, code := mcptest.CLI(t, "ldp", "discover", srv.Base)
	if code != 0 || !strings.Contains(out, "ldp:delegate:docs (Docs delegate)") || !strings.Contains(out, "delegateos.capability.echo=mcp:echo:*") ||
		!strings.Contains(out, "delegateos.cost.echo=100") || !strings.Contains(out, "endpoint:      "+srv.Base+"\n") {
		t.Fatalf("discover: exit %d\n%s%s", code, out, errs)
	}
	submit := func(extra ...string) (string, string, int) {
		args := append([]string{"ldp", "submit", "--key", agentKey, "--token", "@" + tok, "--trust-domain", "research", "--skill", "echo"}, extra...)
		return mcptest.CLI(t, append(args, srv.Base)...)
	}
	out, errs, code = submit("--input", `{"task_type":"echo","instruction":"hello ldp"}`)
	if code != 0 || !strings.Contains(out, `"text":"hello ldp"`) || !strings.Contains(out, "produced by ldp:delegate:docs (docserver-1, signed by did:key:") ||
		!strings.Contains(out, "in semantic_frame") {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	srv.WaitLog("decision", func(l map[string]any) bool { return l["tool"] == "echo" && l["allowed"] == true && l["cost"] == 100.0 })

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
	s, err := thief.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t", Skill: "echo", Input: json.RawMessage(`"stolen"`)}, ldp.ModeText,
		&ldp.DelegateOSMember{DCT: parsed.String(), Format: dct.Format}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := reply.Body.(*ldp.TaskFailed); !ok || f.Error.Code != string(ldp.ReasonWrongKey) {
		t.Fatalf("thief: %+v", reply.Body)
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
