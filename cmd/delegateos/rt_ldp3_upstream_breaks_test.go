//go:build redteam

package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// rt3UpstreamServe runs serve as the LDP delegate (echo at 100, with a
// workspace) in front of u.
func rt3UpstreamServe(t *testing.T, env *mcptest.Env, u *rt3Upstream) *mcptest.Server {
	t.Helper()
	hs := httptest.NewServer(u)
	t.Cleanup(hs.Close)
	ws := filepath.Join(env.Dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = rt3Section + "workspace: " + strconv.Quote(ws) + "\n"
	return env.StartServe(mcptest.ServeOptions{Policy: pol, UpstreamURL: hs.URL + "/mcp", Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
}

// TestRT3ReloadDuringCallMisstatesCost: provenance's cost and the task
// attestation's are the policy in force when the call returns, not what
// the gate charged at its decision. A reload (echo 100 -> 300) while the
// tool runs: the gate charged 100, the delegate's signed attestation and
// provenance say 300. BROKE: provenance 300, gate 100.
func TestRT3ReloadDuringCallMisstatesCost(t *testing.T) {
	u := newRT3Upstream()
	env := mcptest.NewEnv(t)
	srv := rt3UpstreamServe(t, env, u)
	s := rt3Open(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	reply := rt3SubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "b", Skill: "echo", Input: json.RawMessage(`"y"`)})
	<-u.calls // the tool is running
	path := rt3PolicyPath(srv)
	yaml, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mcptest.WriteFile(t, path, strings.Replace(string(yaml), "cost: 100", "cost: 300", 1))
	srv.Signal(syscall.SIGHUP)
	srv.WaitLog("policy reloaded", nil)
	u.answers <- `"result":{"content":[{"type":"text","text":"y"}]}`
	got := <-reply
	res, ok := got.Body.(*ldp.TaskResult)
	if !ok {
		t.Fatalf("%s: %+v", got.Body.Type(), got.Body)
	}
	charged := srv.WaitLog("decision", func(l map[string]any) bool { return l["tool"] == "echo" && l["outcome"] == "result" })["cost"]
	a, err := ldp.ParseTaskAttestation(res.Provenance.DelegateOS.Attestation)
	if err != nil {
		t.Fatal(err)
	}
	if float64(*a.CostChargedMicrocents) != charged {
		t.Fatalf("the gate charged %v; the delegate's signed attestation (and provenance) say %d", charged, *a.CostChargedMicrocents)
	}
}
