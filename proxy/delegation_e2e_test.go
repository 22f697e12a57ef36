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

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/revocation"
)

// delegationRun is one proxy with a workspace, in front of the docserver,
// and a real MCP client: the root has delegated docs:read on /project/**
// to the agent (A), who delegates /project/sub/** to B with a contract.
type delegationRun struct {
	t         *testing.T
	e         *mcptest.Env
	b         *identity.Keypair
	ws        string
	revs      string
	aTok      *dct.Token
	bTok      *dct.Token
	bContract *contract.TaskContract
	p         *mcptest.Process
	s         *mcptest.Session
	ids       int
}

func newDelegationRun(t *testing.T) *delegationRun {
	t.Helper()
	e := mcptest.NewEnv(t)
	r := &delegationRun{t: t, e: e, b: mcptest.NewKey(t, "b"), ws: filepath.Join(e.Dir, "workspace"), revs: filepath.Join(e.Dir, "revocations.json")}
	mcptest.WriteFile(t, r.revs, "[]\n")
	r.aTok = e.Mint(func(p *dct.CreateParams) { p.ContractID = "ct_aaaaaaaaaaaa" }, "docs:read:/project/**")
	delB := mcptest.NewDelegationID()
	var err error
	r.bTok, err = dct.Attenuate(r.aTok, dct.AttenuateParams{Attenuator: e.Agent, Delegatee: r.b.ID(), DelegationID: delB,
		ContractID: "ct_bbbbbbbbbbbb", Capabilities: &[]dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/sub/**"}}})
	if err != nil {
		t.Fatal(err)
	}
	r.bContract, err = contract.Create(e.Agent, contract.CreateParams{ID: "ct_bbbbbbbbbbbb", Title: "Summarize the sub-project notes",
		Inputs:              json.RawMessage(`{"path":"/project/sub/notes.md"}`),
		OutputSchema:        json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`),
		Verification:        json.RawMessage(`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":20}}`),
		MaxBudgetMicrocents: 5000, Deadline: time.Now().Add(time.Hour), MaxChainDepth: 0, RequiredCapabilities: []string{"docs:read"},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pol := e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
	pol.Rules = pol.Rules[1:] // the priced read_file replaces the free one
	pol.RevocationList = r.revs
	pol.Extra = "workspace: " + strconv.Quote(r.ws) + "\nreputation: {completeness: 0.9, clarity: 0.8}\n"
	r.p = e.StartProxy(mcptest.ProxyOptions{Policy: pol})
	r.s = r.p.Connect(mcptest.SessionOptions{})
	return r
}

// request sends a delegateos/ request through the MCP client's transport.
func (r *delegationRun) request(method string, params any) *transport.JSONRPCResponse {
	t := r.t
	t.Helper()
	r.ids++
	resp, err := r.s.Wire.SendRequest(mcptest.Context(t), transport.JSONRPCRequest{JSONRPC: "2.0",
		ID: mcp.NewRequestId("dos-" + strconv.Itoa(r.ids)), Method: method, Params: params})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp
}

func decodeResult[T any](t *testing.T, resp *transport.JSONRPCResponse) T {
	t.Helper()
	var v T
	if resp.Error != nil {
		t.Fatalf("error response: %d %s", resp.Error.Code, resp.Error.Message)
	}
	if err := json.Unmarshal(resp.Result, &v); err != nil {
		t.Fatalf("result %s: %v", resp.Result, err)
	}
	return v
}

func (r *delegationRun) delegate(c *contract.TaskContract, tok *dct.Token, parent string) gate.DelegateResult {
	r.t.Helper()
	cb, err := json.Marshal(c)
	if err != nil {
		r.t.Fatal(err)
	}
	last := tok.Unverified()
	del := last.Authority.DelegationID
	if n := len(last.Attenuations); n > 0 {
		del = last.Attenuations[n-1].DelegationID
	}
	return decodeResult[gate.DelegateResult](r.t, r.request(gate.MethodDelegate, gate.DelegateParams{
		Contract: cb, DCT: tok.String(), DCTFormat: dct.Format, DelegationID: del, ParentDelegationID: parent}))
}

func (r *delegationRun) complete(del string, output string, cost int64) gate.CompleteResult {
	t := r.t
	t.Helper()
	a, err := attest.Create(r.b, attest.CreateParams{ContractID: r.bContract.ID, DelegationID: del, Success: true,
		Output: json.RawMessage(output), CostMicrocents: cost, DurationMs: 1200}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := json.Marshal(a)
	return decodeResult[gate.CompleteResult](t, r.request(gate.MethodComplete, gate.CompleteParams{DelegationID: del, Attestation: ab}))
}

// cli runs the delegateos binary and returns its standard output.
func (r *delegationRun) cli(args ...string) string {
	t := r.t
	t.Helper()
	out, stderr, code := mcptest.CLI(t, args...)
	if code != 0 {
		t.Fatalf("delegateos %s: exit status %d\n%s%s", strings.Join(args, " "), code, out, stderr)
	}
	return out
}

func (r *delegationRun) chainStatus(del string) string {
	r.t.Helper()
	var ds []struct{ ID, Status string }
	if err := json.Unmarshal([]byte(r.cli("chain", "show", "--workspace", r.ws, "--json")), &ds); err != nil {
		r.t.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == del {
			return d.Status
		}
	}
	return ""
}

// The delegation lifecycle through the real proxy binary and a real MCP
// client: delegate, calls under the delegated token, complete with a
// signed attestation; the chain shows the delegation completed and B's
// reputation profile has the new signals.
func TestDelegationThroughProxy(t *testing.T) {
	r := newDelegationRun(t)
	delB := r.bTok.Unverified().Attenuations[0].DelegationID

	// Before any delegation the session has no token: nothing is listed.
	if tools, err := r.s.ListTools(mcptest.Context(t), mcp.ListToolsRequest{}); err != nil || len(tools.Tools) != 0 {
		t.Fatalf("tools before delegating: %v %v", tools, err)
	}
	res := r.delegate(r.bContract, r.bTok, r.aTok.Unverified().Authority.DelegationID)
	if !res.Accepted || res.DelegationID != delB {
		t.Fatalf("delegate: %+v", res)
	}
	// Now B's view: the document tools, nothing else.
	tools, err := r.s.ListTools(mcptest.Context(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !containsAll(names, "read_file", "list_files", "search") || containsAll(names, "echo") || containsAll(names, "write_file") {
		t.Errorf("tools after delegating: %v", names)
	}
	// Calls without a token of their own run under B's.
	if got := r.s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"}); got.Err != nil || got.Res.IsError {
		t.Fatalf("allowed call: %+v", got)
	}
	if got := r.s.Call(t, "read_file", map[string]any{"path": "/project/secret.md"}); got.RPC == nil || got.RPC.Code != gate.DenialCode {
		t.Fatalf("out-of-scope call: %+v", got)
	}
	done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 100)
	if done.Status != "completed" || !done.Verified || done.DelegationID != delB {
		t.Fatalf("complete: %+v", done)
	}
	if st := r.chainStatus(delB); st != "completed" {
		t.Errorf("chain show: %s is %q", delB, st)
	}
	text := r.cli("chain", "show", "--workspace", r.ws, "--name", "B="+r.b.ID())
	if !strings.Contains(text, "→ B  [completed]") {
		t.Errorf("chain show text:\n%s", text)
	}
	if m := r.cli("chain", "show", "--workspace", r.ws, "--format", "mermaid"); !strings.HasPrefix(m, "graph TD") {
		t.Errorf("mermaid:\n%s", m)
	}
	// B's profile: a reliability signal from the evaluation.
	var prof struct {
		Dimensions []struct {
			Name       string   `json:"name"`
			Score      *float64 `json:"score"`
			SampleSize int      `json:"sampleSize"`
		} `json:"dimensions"`
	}
	out := r.cli("reputation", "show", "--workspace", r.ws, "--json", "--", r.b.ID())
	if err := json.Unmarshal([]byte(out), &prof); err != nil {
		t.Fatalf("reputation show: %v\n%s", err, out)
	}
	found := false
	for _, d := range prof.Dimensions {
		if d.Name == "reliability" && d.SampleSize == 1 && d.Score != nil && *d.Score > 0.9 {
			found = true
		}
	}
	if !found {
		t.Errorf("no reliability signal for B:\n%s", out)
	}
	// The session's delegated token ended with the delegation.
	if got := r.s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"}); got.RPC == nil || got.RPC.Code != gate.DenialCode {
		t.Errorf("a call after completion ran under the ended delegation: %+v", got)
	}
	r.p.WaitLog("delegation ended", nil)
}

func containsAll(names []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, n := range names {
			found = found || n == w
		}
		if !found {
			return false
		}
	}
	return true
}

// The same delegation, but the output fails the contract's verification
// (and under-reports its cost): the chain shows it failed and B's
// reliability is low.
func TestDelegationThroughProxyFails(t *testing.T) {
	r := newDelegationRun(t)
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, r.aTok.Unverified().Authority.DelegationID); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	if got := r.s.Call(t, "read_file", map[string]any{"path": "/project/sub/plan.md"}); got.Err != nil || got.Res.IsError {
		t.Fatalf("allowed call: %+v", got)
	}
	done := r.complete(delB, `{"summary":"short"}`, 0)
	if done.Status != "failed" || done.Verified {
		t.Fatalf("complete: %+v", done)
	}
	problems := strings.Join(done.Problems, "\n")
	if !strings.Contains(problems, "verification") || !strings.Contains(problems, "the proxy recorded 100 spent") {
		t.Errorf("problems: %s", problems)
	}
	if st := r.chainStatus(delB); st != "failed" {
		t.Errorf("chain show: %s is %q", delB, st)
	}
	out := r.cli("reputation", "show", "--workspace", r.ws, "--", r.b.ID())
	if !strings.Contains(out, "reliability") {
		t.Errorf("reputation show:\n%s", out)
	}
}

// A rejected delegation leaves the session as it was; a revocation sent as
// a message takes effect on the running proxy and the chain shows it.
func TestDelegationRejectAndRevoke(t *testing.T) {
	r := newDelegationRun(t)
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	// B's token with a contract it is not bound to.
	res := r.delegate(r.bContract, r.aTok, dct.RootParentDelegationID)
	if res.Accepted || res.Reason != gate.RejectContractMismatch {
		t.Fatalf("mismatched delegate: %+v", res)
	}
	if got := r.s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"}); got.RPC == nil || got.RPC.Code != gate.DenialCode {
		t.Fatalf("a call after a rejected delegate was allowed: %+v", got)
	}
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	if got := r.s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"}); got.Err != nil || got.Res.IsError {
		t.Fatalf("allowed call: %+v", got)
	}
	// A, who delegated to B, revokes B's block.
	entry, err := revocation.NewEntry(r.e.Agent, r.bTok.RevocationIDs()[1], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	eb, _ := json.Marshal(entry)
	rv := decodeResult[gate.RevokeResult](t, r.request(gate.MethodRevoke, gate.RevokeParams{Revocation: eb}))
	if len(rv.Delegations) != 1 || rv.Delegations[0] != delB {
		t.Fatalf("revoke: %+v", rv)
	}
	got := r.s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"})
	if got.RPC == nil || got.RPC.Code != gate.DenialCode || !strings.Contains(mcptest.MustJSON(got.RPC.Data), "revoked") {
		t.Fatalf("a call after the revocation: %+v", got)
	}
	if st := r.chainStatus(delB); st != "revoked" {
		t.Errorf("chain show: %s is %q", delB, st)
	}
	// Unknown methods in the proxy's namespace are answered, not forwarded.
	if resp := r.request("delegateos/bogus", map[string]any{}); resp.Error == nil || resp.Error.Code != -32601 {
		t.Errorf("delegateos/bogus: %+v", resp)
	}
	// The revocation list file holds the entry.
	data, err := os.ReadFile(r.revs)
	if err != nil || !strings.Contains(string(data), entry.RevocationID) {
		t.Errorf("revocation list: %s %v", data, err)
	}
}

// A revocation written with the CLI is enforced by the running proxy at
// once; the chain record shows it when chain show reads the list.
func TestDelegationCLIRevocationInChainShow(t *testing.T) {
	r := newDelegationRun(t)
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	tokFile := filepath.Join(r.e.Dir, "b.tok")
	mcptest.WriteFile(t, tokFile, r.bTok.String()+"\n")
	r.cli("revoke", "--key", r.e.KeyFile(r.e.Agent), "--token", "@"+tokFile, "--block", "1", "--list", r.revs)
	mcptest.Eventually(t, "the revocation to take effect", func() bool {
		got := r.s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"})
		return got.RPC != nil && strings.Contains(mcptest.MustJSON(got.RPC.Data), "revoked")
	})
	if st := r.chainStatus(delB); st != "active" {
		t.Errorf("without the list, the record is %q", st)
	}
	var ds []struct{ ID, Status string }
	if err := json.Unmarshal([]byte(r.cli("chain", "show", "--workspace", r.ws, "--revocations", r.revs, "--json")), &ds); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		want := "active"
		if d.ID == delB {
			want = "revoked"
		}
		if d.Status != want {
			t.Errorf("with the list, %s is %q, want %q", d.ID, d.Status, want)
		}
	}
}
