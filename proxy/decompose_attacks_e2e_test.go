//go:build unix

package proxy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red-team attacks on enforced decomposition (issue 22) that held, kept in
// the normal suite (rtdecomp). The ones that found bugs are fixed, and
// their tests are in decompose_allotment_e2e_test.go.

// restartOnWorkspace starts a fresh proxy on the plan run's workspace (a
// restart, or a second proxy sharing it) and connects to it.
func (r *planRun) restartOnWorkspace() {
	r.t.Helper()
	r.p = r.startOnWorkspace("")
	r.s = r.p.Connect(mcptest.SessionOptions{})
}

// startOnWorkspace starts a proxy on the plan run's workspace with the
// priced read_file rule and extra policy lines, not connected.
func (r *planRun) startOnWorkspace(extra string) *mcptest.Process {
	r.t.Helper()
	pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
	pol.Rules = pol.Rules[1:]
	pol.Extra = "workspace: " + strconv.Quote(r.ws) + "\n" + extra
	return r.e.StartProxy(mcptest.ProxyOptions{Policy: pol})
}

// summarize's token on every other gated MCP method (resources/read,
// resources/subscribe, prompts/get, completion/complete, a vendor method
// the policy maps, and a tools/call
// whose _delegateos names the parent's contract) waits for fetch as
// tools/call does; so does a token attenuated below it; the parent's own
// token naming summarize's contract is refused as a contract mismatch.
// Tried by the red team of decomposition; the attack held (was TestRTDecompHeldOtherMethodsWait).
func TestDecompositionOtherMethodsWait(t *testing.T) {
	r := newPlanRun(t, planE2E, 10000)
	sumC, sumTok := r.sub("summarize")
	below, err := dct.Attenuate(sumTok, dct.AttenuateParams{Attenuator: r.b, Delegatee: r.e.Agent.ID(), DelegationID: mcptest.NewDelegationID()})
	if err != nil {
		t.Fatal(err)
	}
	c := r.startOnWorkspace(`resources:
  - {match: "file:///project/**", namespace: docs, action: read}
prompts:
  - {match: "*", namespace: docs, action: read}
methods:
  - {method: acme/search, namespace: docs, action: read, resource: /project/README.md, cost: 7}
`).Raw()
	c.Initialize()
	meta := func(tok *dct.Token, extra string) string {
		return `"_delegateos":{"dct":` + strconv.Quote(tok.String()) + extra + `}`
	}
	for i, tc := range []struct {
		method, params string
		want           string
	}{
		{"resources/read", `{"uri":"file:///project/README.md",` + meta(sumTok, "") + `}`, "dependency_pending"},
		{"resources/subscribe", `{"uri":"file:///project/README.md",` + meta(sumTok, "") + `}`, "dependency_pending"},
		{"prompts/get", `{"name":"greeting",` + meta(sumTok, "") + `}`, "dependency_pending"},
		{"acme/search", `{"q":"x",` + meta(sumTok, "") + `}`, "dependency_pending"},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"summarize"},"argument":{"name":"path","value":"/p"},` + meta(sumTok, "") + `}`, "dependency_pending"},
		{"completion/complete", `{"ref":{"type":"ref/resource","uri":"file:///project/{+path}"},"argument":{"name":"path","value":"s"},` + meta(below, "") + `}`, "dependency_pending"},
		{"tools/call", `{"name":"read_file","arguments":{"path":"/project/README.md"},` + meta(below, `,"contractId":`+strconv.Quote(r.parent.ID)) + `}`, "dependency_pending"},
		{"tools/call", `{"name":"read_file","arguments":{"path":"/project/README.md"},` + meta(r.aTok, `,"contractId":`+strconv.Quote(sumC.ID)) + `}`, string(dct.CapabilityNotGranted)},
	} {
		id := strconv.Itoa(i + 10)
		c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + tc.method + `","params":` + tc.params + `}`)
		m := c.Response(id)
		if got := denialType(m); got != tc.want {
			t.Errorf("%s %s: denial %q, want %q (%+v %s)", tc.method, tc.params[:min(60, len(tc.params))], got, tc.want, m.Error, m.Result)
		}
	}
}

// A dependency cannot be made to look completed: an attestation B signs
// for summarize's delegation, or one naming fetch's ID but summarize's
// key, sent as fetch's completion, completes nothing and summarize still
// waits; once fetch really completed, its attestation replayed as
// summarize's completion is refused.
// Tried by the red team of decomposition; the attack held (was TestRTDecompHeldForeignAttestationCompletesNothing).
func TestDecompositionForeignAttestationCompletesNothing(t *testing.T) {
	r := newPlanRun(t, planE2E, 10000)
	fetchC, fetchTok := r.sub("fetch")
	sumC, sumTok := r.sub("summarize")
	if res := r.delegate(r.parent, r.aTok, dct.RootParentDelegationID); !res.Accepted {
		t.Fatalf("delegate parent: %+v", res)
	}
	if res := r.delegate(fetchC, fetchTok, planDelegation(r.aTok)); !res.Accepted {
		t.Fatalf("delegate fetch: %+v", res)
	}
	if res := r.delegate(sumC, sumTok, planDelegation(r.aTok)); !res.Accepted {
		t.Fatalf("delegate summarize: %+v", res)
	}
	sumKeys, fetchKeys := sumTok.DelegationKeys(), fetchTok.DelegationKeys()
	send := func(del string, p attest.CreateParams) string {
		t.Helper()
		a, err := attest.Create(r.b, p, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ab, _ := json.Marshal(a)
		resp := r.request(gate.MethodComplete, gate.CompleteParams{DelegationID: del, Attestation: ab})
		if resp.Error == nil {
			return "accepted: " + string(resp.Result)
		}
		return resp.Error.Message
	}
	out := json.RawMessage(`{"summary":"done"}`)
	for name, p := range map[string]attest.CreateParams{
		"summarize's attestation":          {ContractID: sumC.ID, DelegationID: planDelegation(sumTok), DelegationKey: sumKeys[len(sumKeys)-1], Success: true, Output: out, DurationMs: 1},
		"fetch's id, summarize's key":      {ContractID: fetchC.ID, DelegationID: planDelegation(fetchTok), DelegationKey: sumKeys[len(sumKeys)-1], Success: true, Output: out, DurationMs: 1},
		"fetch's id, summarize's contract": {ContractID: sumC.ID, DelegationID: planDelegation(fetchTok), DelegationKey: fetchKeys[len(fetchKeys)-1], Success: true, Output: out, DurationMs: 1},
	} {
		if msg := send(planDelegation(fetchTok), p); strings.HasPrefix(msg, "accepted") {
			t.Errorf("%s completed fetch: %s", name, msg)
		}
	}
	if st := r.chainStatus(planDelegation(fetchTok)); st != "active" {
		t.Fatalf("fetch is %s after foreign attestations", st)
	}
	if got := r.s.CallAs(t, sumTok.String(), "read_file", map[string]any{"path": "/project/secret.md"}); got.RPC == nil || !strings.Contains(got.RPC.Message, "dependency_pending") {
		t.Fatalf("summarize ran after foreign attestations: %+v", got)
	}
	fetchAtt, msg, res := r.completeWith(r.b, fetchC, fetchTok, 0)
	if res == nil || res.Status != "completed" {
		t.Fatalf("complete fetch: %q", msg)
	}
	ab, _ := json.Marshal(fetchAtt)
	if resp := r.request(gate.MethodComplete, gate.CompleteParams{DelegationID: planDelegation(sumTok), Attestation: ab}); resp.Error == nil {
		t.Errorf("fetch's attestation replayed completed summarize: %s", resp.Result)
	}
	if st := r.chainStatus(planDelegation(sumTok)); st != "active" {
		t.Errorf("summarize is %s after a replayed attestation", st)
	}
}

// Files dropped into WORKSPACE/plans while the proxy runs: one named like
// a plan that does not parse is ignored (a token no plan names still runs,
// summarize still waits); a verified plan copied under another plan's
// name marks every delegation it names refused (fail closed), and does
// not free summarize.
// Tried by the red team of decomposition; the attack held (was TestRTDecompHeldPlanFilesDroppedWhileRunning).
func TestDecompositionPlanFilesDroppedWhileRunning(t *testing.T) {
	r := newPlanRun(t, planE2E, 10000)
	_, fetchTok := r.sub("fetch")
	_, sumTok := r.sub("summarize")
	args := map[string]any{"path": "/project/sub/notes.md"}
	unrelated := r.e.Mint(func(p *dct.CreateParams) { p.MaxBudgetMicrocents = 5000 }, "docs:read:/project/**")
	plans := filepath.Join(r.ws, "plans")
	mcptest.WriteFile(t, filepath.Join(plans, "plan_000000000001.json"), `{"id":"plan_000000000001","subTasks":[`)
	r.s.CallAs(t, unrelated.String(), "read_file", args).OK(t, "a token no plan names, beside a junk plan file")
	if got := r.s.CallAs(t, sumTok.String(), "read_file", args); got.RPC == nil || !strings.Contains(got.RPC.Message, "dependency_pending") {
		t.Fatalf("summarize ran beside a junk plan file: %+v", got)
	}
	b, err := os.ReadFile(filepath.Join(plans, r.plan.ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	mcptest.WriteFile(t, filepath.Join(plans, "plan_000000000002.json"), string(b))
	for name, tok := range map[string]*dct.Token{"fetch": fetchTok, "summarize": sumTok} {
		if got := r.s.CallAs(t, tok.String(), "read_file", args); got.RPC == nil || !strings.Contains(got.RPC.Message, "does not verify") {
			t.Errorf("%s beside a plan copied under another name: %+v", name, got)
		}
	}
	r.s.CallAs(t, unrelated.String(), "read_file", args).OK(t, "a token no plan names, beside a copied plan")
}
