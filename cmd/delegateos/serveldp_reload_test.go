package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestServeLDPReload: after a reload (SIGHUP, POST /reload) the LDP front
// follows the policy in force: a contract's budget is held to the
// reloaded cost (a task the new cost breaks is refused, one the old cost
// broke runs), and the card states the reloaded cost and the quality
// hint the workspace holds now; a reload that changes the ldp section is
// refused with a clear message and changes nothing.
func TestServeLDPReload(t *testing.T) {
	env := mcptest.NewEnv(t)
	ws := filepath.Join(env.Dir, "ws")
	serverKey := mcptest.NewKey(t, "server")
	policyAt := func(cost int64, ldpSection string) string {
		pol := env.Policy(mcptest.Priced("echo", cost))
		pol.Extra = ldpSection + "workspace: " + strconv.Quote(ws) + "\n"
		return pol.YAML()
	}
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection + "workspace: " + strconv.Quote(ws) + "\n"
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(serverKey)}})
	policyPath := ""
	for i, a := range srv.Cmd.Args {
		if a == "--policy" {
			policyPath = srv.Cmd.Args[i+1]
		}
	}
	ctx := context.Background()
	c := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := c.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}},
		&ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	submit := func(maxUSD float64) *ldp.Envelope {
		t.Helper()
		n++
		c := &ldp.DelegationContract{ContractID: "c1", Objective: "echo", CreatedAt: "2026-01-01T00:00:00Z",
			Policy: ldp.PolicyEnvelope{FailurePolicy: ldp.FailClosed, Budget: &ldp.BudgetPolicy{MaxCostUSD: &maxUSD}}}
		reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: fmt.Sprintf("t%d", n), Skill: "echo", Input: json.RawMessage(`"x"`), Contract: c}, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	card := func() *ldp.IdentityCard {
		t.Helper()
		card, err := c.Discover(ctx, srv.Base)
		if err != nil {
			t.Fatal(err)
		}
		return card
	}
	// reload writes the policy and sends SIGHUP; it returns the log line
	// of the outcome, "policy reloaded" or "reload refused".
	reload := func(yaml string) map[string]any {
		t.Helper()
		mcptest.WriteFile(t, policyPath, yaml)
		const refusedMsg = "reload refused: the policy in force is kept"
		reloaded, refused := len(srv.LogWith("policy reloaded", nil)), len(srv.LogWith(refusedMsg, nil))
		srv.Signal(syscall.SIGHUP)
		mcptest.Eventually(t, "the reload", func() bool {
			return len(srv.LogWith("policy reloaded", nil)) > reloaded || len(srv.LogWith(refusedMsg, nil)) > refused
		})
		if lines := srv.LogWith(refusedMsg, nil); len(lines) > refused {
			return lines[len(lines)-1]
		}
		return map[string]any{"msg": "policy reloaded"}
	}

	// 2e-6 USD is 200 microcents: echo at 100 fits.
	if code := peerFailCode(submit(2e-6)); code != "" {
		t.Fatalf("at 100: %q", code)
	}
	if got := card().Capabilities[0].QualityHint; got != nil {
		t.Fatalf("a quality hint before any signal: %v", *got)
	}
	// The workspace learns of the delegate, the cost goes up to 300.
	if out, errs, code := mcptest.CLI(t, "reputation", "signal", "--workspace", ws, "--agent", serverKey.DID(), "--domain", "echo",
		"--score", "0.75", "--source", mcptest.NewKey(t, "operator").DID()); code != 0 {
		t.Fatalf("signal: %s%s", out, errs)
	}
	if l := reload(policyAt(300, serveLDPSection)); l["msg"] != "policy reloaded" {
		t.Fatalf("reload: %v", l)
	}
	if code := peerFailCode(submit(2e-6)); code != ldp.CodeContract {
		t.Fatalf("at 300 with a budget of 200: %q", code)
	}
	if code := peerFailCode(submit(4e-6)); code != "" {
		t.Fatalf("at 300 with a budget of 400: %q", code)
	}
	after := card()
	if after.Metadata[ldp.MetaCostPrefix+"echo"] != "300" || after.Capabilities[0].QualityHint == nil || math.Abs(*after.Capabilities[0].QualityHint-0.75) > 0.01 ||
		!strings.HasPrefix(after.Metadata[ldp.MetaQualityPrefix+"echo"], "rdp (") {
		t.Fatalf("the card after the reload: %+v", after)
	}
	// Down to 50: a budget of 0.6e-6 USD (60) fits.
	if l := reload(policyAt(50, serveLDPSection)); l["msg"] != "policy reloaded" {
		t.Fatalf("reload: %v", l)
	}
	if code := peerFailCode(submit(0.6e-6)); code != "" {
		t.Fatalf("at 50 with a budget of 60: %q", code)
	}
	// A changed ldp section is refused, and the front keeps its card.
	l := reload(policyAt(50, strings.Replace(serveLDPSection, "name: Docs delegate", "name: Renamed", 1)))
	if e, _ := l["error"].(string); !strings.Contains(e, "ldp changed, and it cannot change while running; the policy in force is kept") {
		t.Fatalf("a changed ldp section: %v", l)
	}
	if got := card(); got.Name != "Docs delegate" || got.Metadata[ldp.MetaCostPrefix+"echo"] != "50" {
		t.Fatalf("the card after a refused reload: %+v", got)
	}
	if n := peerAllowed(t, srv, "echo", 3); n != 3 {
		t.Fatalf("%d echo calls, want 3", n)
	}
}
