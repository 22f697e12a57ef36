package main

import (
	"encoding/json"
	"fmt"
	"net/http"
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

// upstreamLDPServe runs serve as the LDP delegate (echo at 100, with a
// workspace, and an audit log when audit) in front of the upstream u.
func upstreamLDPServe(t *testing.T, env *mcptest.Env, u *peerUpstream, audit bool) *mcptest.Server {
	t.Helper()
	hs := httptest.NewServer(u)
	t.Cleanup(hs.Close)
	ws := filepath.Join(env.Dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = peerSection + "workspace: " + strconv.Quote(ws) + "\n"
	if audit {
		pol.Extra += "audit_log: " + strconv.Quote(filepath.Join(env.Dir, "audit.log")) + "\n"
	}
	return env.StartServe(mcptest.ServeOptions{Policy: pol, UpstreamURL: hs.URL + "/mcp", Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
}

// TestLDPCostChargedIsTheGates: provenance's cost and the task
// attestation's were the policy in force when the call returned, not what
// the gate charged at its decision: a reload (echo 100 -> 300) while the
// tool ran made the delegate sign 300 for a call the gate charged 100
// (rtldp3 #14). Now the cost is the gate's: its execution receipt's with
// an audit log, else the policy's the call was sent under.
func TestLDPCostChargedIsTheGates(t *testing.T) {
	for _, audit := range []bool{false, true} {
		t.Run(map[bool]string{false: "without audit log", true: "with audit log"}[audit], func(t *testing.T) {
			u := newPeerUpstream()
			env := mcptest.NewEnv(t)
			srv := upstreamLDPServe(t, env, u, audit)
			s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
			reply := peerSubmitAsync(t, s, &ldp.TaskSubmit{TaskID: "b", Skill: "echo", Input: json.RawMessage(`"y"`)})
			<-u.calls // the tool is running
			path := peerPolicyPath(srv)
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
			if charged != float64(100) || float64(*a.CostChargedMicrocents) != charged || *res.Provenance.DelegateOS.CostChargedMicrocents != *a.CostChargedMicrocents {
				t.Fatalf("the gate charged %v; the delegate's signed attestation says %d, provenance %d", charged, *a.CostChargedMicrocents, *res.Provenance.DelegateOS.CostChargedMicrocents)
			}
		})
	}
}

// TestRequestMaxCost: a request may bound what its call reserves
// (params._delegateos.maxCostMicrocents): over it, the gate refuses the
// call budget_exceeded at its decision, with the policy in force then.
// The LDP front sends a task's contract budget so, which closes the window
// between its quote and the gate's decision (rtldp3 #8).
func TestRequestMaxCost(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := env.StartServe(mcptest.ServeOptions{Policy: env.Policy(mcptest.Priced("echo", 100))})
	hdr := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Authorization": "Bearer " + env.Mint(nil, "mcp:echo:*").String()}
	call := func(max int) string {
		return string(srv.Do(http.MethodPost, "/mcp", hdr, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_delegateos":{"maxCostMicrocents":%d},`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}`, max)).Body)
	}
	if out := call(99); !strings.Contains(out, "budget_exceeded") || !strings.Contains(out, "allows at most 99") {
		t.Fatalf("a call of cost 100 under a maximum of 99: %s", out)
	}
	if out := call(100); !strings.Contains(out, `"text":"hi"`) {
		t.Fatalf("a call of cost 100 under a maximum of 100: %s", out)
	}
}
