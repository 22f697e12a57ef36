//go:build unix

package proxy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// planRun is a parent task (contract and token from the root to the
// agent) that the agent split with `delegateos contract decompose` into
// fetch → summarize for B, and a proxy with the workspace the plan is
// recorded in.
type planRun struct {
	*delegationRun
	parent *contract.TaskContract
	plan   *contract.Plan
	out    string
	// policy is the proxy's policy file, with a spend store.
	policy string
}

const planE2E = `strategy: sequential
subTasks:
  - id: fetch
    title: Fetch the notes
    capabilities: [{namespace: docs, action: read, resource: /project/sub/**}]
    budgetMicrocents: 3000
  - id: summarize
    title: Summarize them
    capabilities: [{namespace: docs, action: read, resource: /project/**}]
    budgetMicrocents: 3000
`

func newPlanRun(t *testing.T, planYAML string, budget int64) *planRun {
	t.Helper()
	e := mcptest.NewEnv(t)
	r := &planRun{delegationRun: &delegationRun{t: t, e: e, b: mcptest.NewKey(t, "b"), ws: filepath.Join(e.Dir, "workspace"), revs: filepath.Join(e.Dir, "revocations.json")}}
	mcptest.WriteFile(t, r.revs, "[]\n")
	var err error
	r.parent, err = contract.Create(e.Root, contract.CreateParams{ID: "ct_e2e0000000aa", Title: "Report on the project",
		OutputSchema: json.RawMessage(`{"type":"object"}`), Verification: json.RawMessage(`{"method":"schema_match","schema":{"type":"object"}}`),
		MaxBudgetMicrocents: budget, Deadline: time.Now().Add(time.Hour), MaxChainDepth: 2, RequiredCapabilities: []string{"docs:read"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r.aTok = e.Mint(func(p *dct.CreateParams) { p.ContractID = r.parent.ID; p.MaxBudgetMicrocents = budget }, "docs:read:/project/**")
	cb, _ := json.Marshal(r.parent)
	mcptest.WriteFile(t, filepath.Join(e.Dir, "parent.json"), string(cb))
	mcptest.WriteFile(t, filepath.Join(e.Dir, "a.tok"), r.aTok.String())
	if planYAML != "" { // "": the test decomposes in-band
		mcptest.WriteFile(t, filepath.Join(e.Dir, "plan.yaml"), planYAML)
		r.out = filepath.Join(e.Dir, "out")
		r.cli("contract", "decompose", "--contract", filepath.Join(e.Dir, "parent.json"), "--token", "@"+filepath.Join(e.Dir, "a.tok"),
			"--plan", filepath.Join(e.Dir, "plan.yaml"), "--key", e.KeyFile(e.Agent), "--assignee", r.b.ID(), "--workspace", r.ws, "--out", r.out)
		pb, err := os.ReadFile(filepath.Join(r.out, "plan.json"))
		if err != nil {
			t.Fatal(err)
		}
		if r.plan, err = contract.ParsePlan(pb); err != nil {
			t.Fatalf("decompose wrote a plan that does not parse: %v", err)
		}
	}
	pol := e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
	pol.Rules = pol.Rules[1:]
	pol.RevocationList = r.revs
	pol.SpendStore = filepath.Join(e.Dir, "spend.json")
	pol.Extra = "workspace: " + strconv.Quote(r.ws) + "\n"
	r.policy = filepath.Join(e.Dir, "policy.yaml")
	mcptest.WriteFile(t, r.policy, pol.YAML())
	r.p = e.StartProxy(mcptest.ProxyOptions{Flags: []string{"--policy", r.policy}})
	r.s = r.p.Connect(mcptest.SessionOptions{})
	return r
}

// sub returns a sub-task's contract and token as decompose wrote them.
func (r *planRun) sub(id string) (*contract.TaskContract, *dct.Token) {
	t := r.t
	t.Helper()
	cb, err := os.ReadFile(filepath.Join(r.out, id+".contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := contract.Parse(cb)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := os.ReadFile(filepath.Join(r.out, id+".token"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := dct.Parse(strings.TrimSpace(string(tb)))
	if err != nil {
		t.Fatal(err)
	}
	return c, tok
}

// completeAs sends delegateos/complete for a delegation with an
// attestation signed by key, and returns the raw response.
func (r *planRun) completeWith(key *identity.Keypair, c *contract.TaskContract, tok *dct.Token, cost int64, children ...string) (*attest.Attestation, string, *gate.CompleteResult) {
	r.t.Helper()
	return r.attestAndComplete(true, key, c, tok, cost, children...)
}

func (r *planRun) attestAndComplete(success bool, key *identity.Keypair, c *contract.TaskContract, tok *dct.Token, cost int64, children ...string) (*attest.Attestation, string, *gate.CompleteResult) {
	t := r.t
	t.Helper()
	keys := tok.DelegationKeys()
	a, err := attest.Create(key, attest.CreateParams{ContractID: c.ID, DelegationID: planDelegation(tok), DelegationKey: keys[len(keys)-1], Success: success,
		Output: json.RawMessage(`{"summary":"done"}`), CostMicrocents: cost, DurationMs: 10, Children: children}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := json.Marshal(a)
	resp := r.request(gate.MethodComplete, gate.CompleteParams{DelegationID: planDelegation(tok), Attestation: ab})
	if resp.Error != nil {
		return a, resp.Error.Message, nil
	}
	res := decodeResult[gate.CompleteResult](t, resp)
	return a, "", &res
}

func planDelegation(tok *dct.Token) string {
	u := tok.Unverified()
	if n := len(u.Attenuations); n > 0 {
		return u.Attenuations[n-1].DelegationID
	}
	return u.Authority.DelegationID
}

// The plan is enforced through the real proxy: summarize's token is
// refused (dependency_pending, naming fetch) for calls and for its
// completion until fetch has a verified completion, and allowed after; a
// completion signed by another key than the assignee's completes nothing;
// the parent completes only once its sub-tasks have, citing their
// attestations.
func TestDecompositionEnforcedThroughProxy(t *testing.T) {
	r := newPlanRun(t, planE2E, 10000)
	fetchC, fetchTok := r.sub("fetch")
	sumC, sumTok := r.sub("summarize")
	if res := r.delegate(r.parent, r.aTok, dct.RootParentDelegationID); !res.Accepted {
		t.Fatalf("delegate parent: %+v", res)
	}
	for _, s := range []struct {
		c   *contract.TaskContract
		tok *dct.Token
	}{{fetchC, fetchTok}, {sumC, sumTok}} {
		if res := r.delegate(s.c, s.tok, planDelegation(r.aTok)); !res.Accepted {
			t.Fatalf("delegate %s: %+v", s.c.ID, res)
		}
	}
	args := map[string]any{"path": "/project/secret.md"}
	waits := `sub-task "summarize" (delegation ` + planDelegation(sumTok) + `) of plan ` + r.plan.ID + ` waits for "fetch" (delegation ` + planDelegation(fetchTok) + `: active) to complete`
	got := r.s.CallAs(t, sumTok.String(), "read_file", args)
	if got.RPC == nil || got.RPC.Code != gate.DenialCode || !strings.Contains(got.RPC.Message, "dependency_pending — "+waits) {
		t.Fatalf("a call under summarize before fetch completed: %+v", got)
	}
	// Another way in: completing summarize before fetch.
	if _, msg, _ := r.completeWith(r.b, sumC, sumTok, 0); !strings.Contains(msg, "dependency_pending: "+waits) {
		t.Fatalf("summarize completed before fetch: %q", msg)
	}
	// The parent cannot be completed before its sub-tasks.
	if _, msg, _ := r.completeWith(r.e.Agent, r.parent, r.aTok, 0); !strings.Contains(msg, `sub-task "fetch" (delegation `+planDelegation(fetchTok)+`) has not ended (active)`) {
		t.Fatalf("the parent completed before its sub-tasks: %q", msg)
	}
	r.s.CallAs(t, fetchTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"}).OK(t, "a call under fetch")
	// A completion of fetch signed by another key than B's is refused.
	if _, msg, _ := r.completeWith(r.e.Agent, fetchC, fetchTok, 100); !strings.Contains(msg, "not by the delegatee") {
		t.Fatalf("fetch completed by the wrong key: %q", msg)
	}
	if got := r.s.CallAs(t, sumTok.String(), "read_file", args); got.RPC == nil || !strings.Contains(got.RPC.Message, "dependency_pending") {
		t.Fatalf("the wrong key's completion lifted the wait: %+v", got)
	}
	fetchAtt, msg, res := r.completeWith(r.b, fetchC, fetchTok, 100)
	if res == nil || res.Status != "completed" {
		t.Fatalf("complete fetch: %q %+v", msg, res)
	}
	r.s.CallAs(t, sumTok.String(), "read_file", args).OK(t, "a call under summarize after fetch completed")
	// The DAG as contract show --plan draws it.
	m := r.cli("contract", "show", "--plan", r.plan.ID, "--workspace", r.ws, "--spend-store", filepath.Join(r.e.Dir, "spend.json"), "--name", "B="+r.b.ID())
	for _, want := range []string{"graph TD\n", `n0["fetch: Fetch the notes<br/>B #183; completed<br/>spent 100 of 3000"]:::completed`,
		`n1["summarize: Summarize them<br/>B #183; active<br/>spent 100 of 3000"]:::active`, "  n0 --> n1\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("contract show --plan lacks %q:\n%s", want, m)
		}
	}
	sumAtt, msg, res := r.completeWith(r.b, sumC, sumTok, 100)
	if res == nil || res.Status != "completed" {
		t.Fatalf("complete summarize: %q %+v", msg, res)
	}
	// The parent's attestation must cite its sub-tasks' attestations.
	if _, msg, _ := r.completeWith(r.e.Agent, r.parent, r.aTok, 200, fetchAtt.ID); !strings.Contains(msg, `must cite sub-task "summarize"'s attestation `+sumAtt.ID) {
		t.Fatalf("the parent completed without citing summarize: %q", msg)
	}
	if _, msg, res := r.completeWith(r.e.Agent, r.parent, r.aTok, 200, fetchAtt.ID, sumAtt.ID); res == nil || res.Status != "completed" {
		t.Fatalf("complete the parent: %q %+v", msg, res)
	}
	// Reputation: each sub-task's evaluation is a signal for its assignee,
	// the parent's for the decomposer.
	for who, want := range map[*identity.Keypair]int{r.b: 2, r.e.Agent: 1} {
		var prof struct {
			Dimensions []struct {
				Name       string `json:"name"`
				SampleSize int    `json:"sampleSize"`
			} `json:"dimensions"`
		}
		out := r.cli("reputation", "show", "--workspace", r.ws, "--json", "--", who.ID())
		if err := json.Unmarshal([]byte(out), &prof); err != nil {
			t.Fatalf("reputation show: %v\n%s", err, out)
		}
		got := -1
		for _, d := range prof.Dimensions {
			if d.Name == "reliability" {
				got = d.SampleSize
			}
		}
		if got != want {
			t.Errorf("%s has %d reliability signals, want %d:\n%s", who.ID(), got, want, out)
		}
	}
}

// Attacks on the recorded plan: an edited plan file (any member: here a
// dependency dropped) does not verify, and every delegation it names stays
// refused rather than freed; a plan signed by someone other than the
// decomposer (B, the assignee, naming fetch as waiting on summarize) binds
// nothing it did not delegate; a token B attenuates from summarize's waits
// as summarize does.
func TestDecompositionPlanAttacksThroughProxy(t *testing.T) {
	r := newPlanRun(t, planE2E, 10000)
	_, fetchTok := r.sub("fetch")
	_, sumTok := r.sub("summarize")
	args := map[string]any{"path": "/project/sub/notes.md"}

	// B signs its own plan claiming fetch depends on summarize.
	evil := *r.plan
	evil.ID = "plan_eeeeeeeeeeee"
	evil.Strategy = contract.StrategyDAG
	evil.SubTasks = append([]contract.SubTask{}, r.plan.SubTasks...)
	evil.SubTasks[0].DependsOn = []string{"summarize"}
	evil.SubTasks[1].DependsOn = []string{}
	if err := evil.Sign(r.b); err != nil {
		t.Fatal(err)
	}
	eb, _ := json.Marshal(&evil)
	mcptest.WriteFile(t, filepath.Join(r.ws, "plans", evil.ID+".json"), string(eb))
	r.s.CallAs(t, fetchTok.String(), "read_file", args).OK(t, "fetch under a plan of B's")
	if got := r.s.CallAs(t, sumTok.String(), "read_file", args); got.RPC == nil || !strings.Contains(got.RPC.Message, `dependency_pending — sub-task "summarize"`) {
		t.Fatalf("B's plan freed summarize: %+v", got)
	}
	// A token B attenuates from summarize's waits for fetch too.
	deeper, err := dct.Attenuate(sumTok, dct.AttenuateParams{Attenuator: r.b, Delegatee: r.e.Agent.ID(), DelegationID: mcptest.NewDelegationID()})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.s.CallAs(t, deeper.String(), "read_file", args); got.RPC == nil || !strings.Contains(got.RPC.Message, `waits for "fetch"`) {
		t.Fatalf("a token below summarize ran before fetch completed: %+v", got)
	}

	// A plan recorded in another workspace than the proxy's: its sub-tasks
	// cannot be delegated here, where their dependencies would go unseen.
	elsewhere := filepath.Join(r.e.Dir, "elsewhere")
	r.cli("contract", "decompose", "--contract", filepath.Join(r.e.Dir, "parent.json"), "--token", "@"+filepath.Join(r.e.Dir, "a.tok"),
		"--plan", filepath.Join(r.e.Dir, "plan.yaml"), "--key", filepath.Join(r.e.Dir, "agent.key"), "--assignee", r.b.ID(), "--workspace", elsewhere, "--out", elsewhere)
	cb, err := os.ReadFile(filepath.Join(elsewhere, "summarize.contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	lostC, err := contract.Parse(cb)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := os.ReadFile(filepath.Join(elsewhere, "summarize.token"))
	lostTok, err := dct.Parse(strings.TrimSpace(string(tb)))
	if err != nil {
		t.Fatal(err)
	}
	if res := r.delegate(lostC, lostTok, planDelegation(r.aTok)); res.Accepted || !strings.Contains(res.Details, "which is not recorded in this proxy's workspace") {
		t.Errorf("a sub-task of a plan recorded elsewhere was delegated: %+v", res)
	}
	// The recorded plan's contract with another token is not its sub-task.
	sumC, _ := r.sub("summarize")
	if res := r.delegate(sumC, lostTok, planDelegation(r.aTok)); res.Accepted {
		t.Errorf("a sub-task contract was delegated with a token its plan did not make: %+v", res)
	}

	// The agent's recorded plan edited in place: summarize's dependency
	// dropped. The file no longer verifies; the delegations it names are
	// refused, fetch included.
	path := filepath.Join(r.ws, "plans", r.plan.ID+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `"dependsOn":["fetch"]`, `"dependsOn":[]`, 1)
	edited = strings.Replace(edited, `"strategy":"sequential"`, `"strategy":"dag"`, 1)
	if edited == string(b) {
		t.Fatalf("the edit did not apply to %s", b)
	}
	// A new proxy reads the edited file (one already running read the
	// plan when it was made, and keeps what verified).
	mcptest.WriteFile(t, path, edited)
	pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
	pol.Rules = pol.Rules[1:]
	pol.Extra = "workspace: " + strconv.Quote(r.ws) + "\n"
	r.p = r.e.StartProxy(mcptest.ProxyOptions{Policy: pol})
	r.s = r.p.Connect(mcptest.SessionOptions{})
	for name, tok := range map[string]*dct.Token{"summarize": sumTok, "fetch": fetchTok} {
		got := r.s.CallAs(t, tok.String(), "read_file", args)
		if got.RPC == nil || !strings.Contains(got.RPC.Message, "dependency_pending") || !strings.Contains(got.RPC.Message, "does not verify") {
			t.Errorf("%s under an edited plan: %+v", name, got)
		}
	}
}

const planParallel = `strategy: parallel
subTasks:
  - {id: a, title: A, capabilities: [{namespace: docs, action: read, resource: /project/**}], budgetMicrocents: 1000}
  - {id: b, title: B, capabilities: [{namespace: docs, action: read, resource: /project/**}], budgetMicrocents: 1000}
  - {id: c, title: C, capabilities: [{namespace: docs, action: read, resource: /project/**}], budgetMicrocents: 1000}
`

// burst makes n calls of read_file (100 microcents each) under tok at
// once and returns how many were allowed; every other must be refused as
// budget_exceeded.
func (r *planRun) burst(tok *dct.Token, n int) int {
	t := r.t
	t.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			got := r.s.CallAs(t, tok.String(), "read_file", map[string]any{"path": "/project/secret.md"})
			switch {
			case got.Err == nil && got.Res != nil && !got.Res.IsError:
				allowed.Add(1)
			case got.RPC == nil || !strings.Contains(got.RPC.Message, "budget_exceeded"):
				t.Errorf("a call refused otherwise than budget_exceeded: %v %+v", got.Err, got.RPC)
			}
		})
	}
	wg.Wait()
	return int(allowed.Load())
}

// Budgets across a parallel plan run concurrently through the proxy: each
// sub-task gets exactly its allotment, the decomposer's own calls cannot
// spend what the sub-tasks were allotted while they run, and a sub-task's
// unspent allotment returns to the parent when it ends. Nothing goes over
// at any level. spend --format tree shows the plan.
func TestDecompositionBudgetsThroughProxy(t *testing.T) {
	r := newPlanRun(t, planParallel, 5000)
	toks := map[string]*dct.Token{}
	cs := map[string]*contract.TaskContract{}
	for _, id := range []string{"a", "b", "c"} {
		cs[id], toks[id] = r.sub(id)
		if res := r.delegate(cs[id], toks[id], planDelegation(r.aTok)); !res.Accepted {
			t.Fatalf("delegate %s: %+v", id, res)
		}
	}
	// a and b try 15 calls each, c 3, all at once, with the parent's own.
	var got [3]int
	var wg sync.WaitGroup
	for i, s := range []struct {
		id string
		n  int
	}{{"a", 15}, {"b", 15}, {"c", 3}} {
		wg.Go(func() { got[i] = r.burst(toks[s.id], s.n) })
	}
	wg.Wait()
	if got != [3]int{10, 10, 3} {
		t.Fatalf("allowed per sub-task %v, want [10 10 3]", got)
	}
	// The parent's own calls: 5000 less 2300 spent less c's 700 held.
	if n := r.burst(r.aTok, 30); n != 20 {
		t.Fatalf("the decomposer made %d calls of 100 while c holds 700 of 5000 (2300 spent), want 20", n)
	}
	// c ends having spent 300: its 700 return.
	if _, msg, res := r.completeWith(r.b, cs["c"], toks["c"], 300); res == nil || res.Status != "completed" {
		t.Fatalf("complete c: %q %+v", msg, res)
	}
	if n := r.burst(r.aTok, 10); n != 7 {
		t.Fatalf("after c ended the decomposer made %d calls, want the 7 its unspent 700 pay for", n)
	}
	var rep struct {
		Delegations []struct {
			Path      []string `json:"path"`
			Committed int64    `json:"committed"`
			Budget    *int64   `json:"budget"`
			Plans     []string `json:"plans"`
			SubTask   *struct {
				ID                                  string
				Allotted, Reserved, Spent, Returned int64
			} `json:"subTask"`
		} `json:"delegations"`
	}
	out := r.cli("spend", "--policy", r.policy, "--json")
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("spend --json: %v\n%s", err, out)
	}
	want := map[string][4]int64{"a": {1000, 0, 1000, 0}, "b": {1000, 0, 1000, 0}, "c": {1000, 0, 300, 700}}
	seen := 0
	for _, d := range rep.Delegations {
		switch {
		case len(d.Path) == 1:
			// The parent's level: everything, and not a microcent over.
			if d.Committed != 5000 || d.Budget == nil || *d.Budget != 5000 || len(d.Plans) != 1 || d.Plans[0] != r.plan.ID {
				t.Errorf("the parent's spend: %+v", d)
			}
			seen++
		case d.SubTask != nil:
			w := want[d.SubTask.ID]
			if got := [4]int64{d.SubTask.Allotted, d.SubTask.Reserved, d.SubTask.Spent, d.SubTask.Returned}; got != w {
				t.Errorf("sub-task %s: allotted, reserved, spent, returned %v, want %v", d.SubTask.ID, got, w)
			}
			seen++
		}
	}
	if seen != 4 {
		t.Errorf("spend --json shows %d of the parent and its 3 sub-tasks:\n%s", seen, out)
	}
	if m := r.cli("spend", "--policy", r.policy, "--format", "mermaid"); !strings.Contains(m, "of plan "+r.plan.ID+"  allotted 1000  reserved 0  spent 300  returned 700") {
		t.Errorf("spend mermaid lacks c's allotment:\n%s", m)
	}
	tree := r.cli("spend", "--policy", r.policy, "--format", "tree")
	for _, want := range []string{"plan " + r.plan.ID + " (parallel, 3 sub-tasks, allotted 3000)", `sub-task "c" of plan ` + r.plan.ID + "  allotted 1000  reserved 0  spent 300  returned 700"} {
		if !strings.Contains(tree, want) {
			t.Errorf("spend tree lacks %q:\n%s", want, tree)
		}
	}
}

// A sub-task that fails fails the task it was split from: the parent's
// completion, citing every sub-task's attestation, is recorded failed and
// says which sub-task failed.
func TestDecompositionFailedSubTaskFailsParent(t *testing.T) {
	r := newPlanRun(t, planParallel, 5000)
	if res := r.delegate(r.parent, r.aTok, dct.RootParentDelegationID); !res.Accepted {
		t.Fatalf("delegate parent: %+v", res)
	}
	var cited []string
	for _, id := range []string{"a", "b", "c"} {
		c, tok := r.sub(id)
		if res := r.delegate(c, tok, planDelegation(r.aTok)); !res.Accepted {
			t.Fatalf("delegate %s: %+v", id, res)
		}
		a, msg, res := r.attestAndComplete(id != "b", r.b, c, tok, 0)
		if want := map[bool]string{true: "completed", false: "failed"}[id != "b"]; res == nil || res.Status != want {
			t.Fatalf("complete %s: %q %+v, want %s", id, msg, res, want)
		}
		cited = append(cited, a.ID)
	}
	_, msg, res := r.completeWith(r.e.Agent, r.parent, r.aTok, 0, cited...)
	if res == nil || res.Status != "failed" || !strings.Contains(strings.Join(res.Problems, "\n"), `sub-task "b" of plan `+r.plan.ID+" failed") {
		t.Fatalf("the parent with a failed sub-task: %q %+v", msg, res)
	}
}

// inBand makes a decomposition of tok (held by key) as an agent's own code
// would, with contract.Decompose.
func (r *planRun) inBand(key *identity.Keypair, tok *dct.Token, planYAML string) *contract.Decomposition {
	r.t.Helper()
	return r.inBandOf(r.parent, key, tok, planYAML)
}

func (r *planRun) inBandOf(parent *contract.TaskContract, key *identity.Keypair, tok *dct.Token, planYAML string) *contract.Decomposition {
	t := r.t
	t.Helper()
	v, err := dct.NewVerifier(dct.Options{Roots: []string{r.e.Root.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := v.VerifyChain(tok.String(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	spec, err := contract.ReadPlanSpec([]byte(planYAML))
	if err != nil {
		t.Fatal(err)
	}
	assignee := r.b.ID() // B's own sub-tasks go back to the agent
	if key == r.b {
		assignee = r.e.Agent.ID()
	}
	d, err := contract.Decompose(contract.DecomposeParams{Key: key, Parent: parent, Token: tok, Scope: scope, Spec: spec, Assignee: assignee})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (r *planRun) sendDecompose(d *contract.Decomposition, parentDCT string) gate.DecomposeResult {
	t := r.t
	t.Helper()
	p := gate.DecomposeParams{DCT: parentDCT}
	var err error
	if p.Plan, err = json.Marshal(d.Plan); err != nil {
		t.Fatal(err)
	}
	for i := range d.Contracts {
		cb, _ := json.Marshal(d.Contracts[i])
		p.Contracts = append(p.Contracts, cb)
		p.DCTs = append(p.DCTs, d.Tokens[i].String())
	}
	return decodeResult[gate.DecomposeResult](t, r.request(gate.MethodDecompose, p))
}

// delegateos/decompose: the agent splits its own task in-band, within its
// token; the proxy checks the plan as decompose does and then enforces
// it. Refused: a sub-task widened (and the plan re-signed by its holder),
// tokens that are not the plan's, a plan signed by someone other than the
// token's holder, a plan made for another delegation of the same contract.
func TestDecompositionInBandThroughProxy(t *testing.T) {
	r := newPlanRun(t, "", 10000)
	if res := r.delegate(r.parent, r.aTok, dct.RootParentDelegationID); !res.Accepted {
		t.Fatalf("delegate parent: %+v", res)
	}
	refused := func(what string, d *contract.Decomposition, parentDCT, want string) {
		t.Helper()
		if res := r.sendDecompose(d, parentDCT); res.Accepted || !strings.Contains(res.Details, want) {
			t.Errorf("%s: %+v, want a refusal with %q", what, res, want)
		}
	}
	wide := r.inBand(r.e.Agent, r.aTok, planE2E)
	wide.Plan.SubTasks[1].Capabilities[0].Resource = "/**"
	if err := wide.Plan.Sign(r.e.Agent); err != nil {
		t.Fatal(err)
	}
	refused("a widened sub-task", wide, "", `sub-task "summarize": capability docs:read:/** is not covered by the parent token's capabilities (docs:read:/project/**)`)
	swapped := r.inBand(r.e.Agent, r.aTok, planE2E)
	swapped.Tokens[0], swapped.Tokens[1] = swapped.Tokens[1], swapped.Tokens[0]
	refused("swapped tokens", swapped, "", `sub-task "fetch": its token is not the parent token attenuated once for delegation key`)
	over := r.inBand(r.e.Agent, r.aTok, planE2E)
	over.Plan.SubTasks[0].BudgetMicrocents = 9000
	if err := over.Plan.Sign(r.e.Agent); err != nil {
		t.Fatal(err)
	}
	refused("an over budget plan", over, "", "budgets sum to 12000 microcents, over the 10000 that remain")
	// B signs a plan over the agent's token.
	forged := r.inBand(r.e.Agent, r.aTok, planE2E)
	if err := forged.Plan.Sign(r.b); err != nil {
		t.Fatal(err)
	}
	refused("a plan signed by B", forged, "", "not by the parent token's holder")
	// A plan for another delegation of the same contract (a second token
	// the root gave the agent) claims this one's place.
	other := r.e.Mint(func(p *dct.CreateParams) { p.ContractID = r.parent.ID; p.MaxBudgetMicrocents = 10000 }, "docs:read:/project/**")
	refused("another delegation's plan", r.inBand(r.e.Agent, other, planE2E), "", "not the parent token's "+planDelegation(r.aTok))

	good := r.inBand(r.e.Agent, r.aTok, planE2E)
	if res := r.sendDecompose(good, ""); !res.Accepted || res.PlanID != good.Plan.ID {
		t.Fatalf("in-band decompose: %+v", res)
	}
	fetch, sum := good.Tokens[0], good.Tokens[1]
	if got := r.s.CallAs(t, sum.String(), "read_file", map[string]any{"path": "/project/secret.md"}); got.RPC == nil || !strings.Contains(got.RPC.Message, `dependency_pending — sub-task "summarize"`) {
		t.Fatalf("summarize before fetch, in-band plan: %+v", got)
	}
	r.s.CallAs(t, fetch.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"}).OK(t, "fetch under the in-band plan")
	// B cannot start summarize by splitting it: decomposing a waiting
	// sub-task is refused as a call under it is.
	if res := r.delegate(good.Contracts[1], sum, planDelegation(r.aTok)); !res.Accepted {
		t.Fatalf("delegate summarize: %+v", res)
	}
	split := r.inBandOf(good.Contracts[1], r.b, sum, "strategy: parallel\nsubTasks:\n  - {id: x, title: X, capabilities: [{namespace: docs, action: read, resource: /project/secret.md}], budgetMicrocents: 100}\n")
	if res := r.sendDecompose(split, sum.String()); res.Accepted || res.Reason != "dependency_pending" || !strings.Contains(res.Details, `waits for "fetch"`) {
		t.Errorf("a waiting sub-task was split: %+v", res)
	}
}

// A plan may say a sub-task's failure does not fail the whole (optional:
// true): the parent then completes with that sub-task failed.
func TestDecompositionOptionalSubTask(t *testing.T) {
	r := newPlanRun(t, strings.Replace(planParallel, "title: B,", "title: B, optional: true,", 1), 5000)
	if !r.plan.SubTask("b").Optional {
		t.Fatalf("the plan does not mark b optional: %+v", r.plan.SubTasks)
	}
	if res := r.delegate(r.parent, r.aTok, dct.RootParentDelegationID); !res.Accepted {
		t.Fatalf("delegate parent: %+v", res)
	}
	var cited []string
	for _, id := range []string{"a", "b", "c"} {
		c, tok := r.sub(id)
		if res := r.delegate(c, tok, planDelegation(r.aTok)); !res.Accepted {
			t.Fatalf("delegate %s: %+v", id, res)
		}
		a, msg, res := r.attestAndComplete(id != "b", r.b, c, tok, 0)
		if res == nil {
			t.Fatalf("complete %s: %q", id, msg)
		}
		if id != "b" {
			cited = append(cited, a.ID)
		}
	}
	// The failed optional sub-task's attestation need not be cited.
	if _, msg, res := r.completeWith(r.e.Agent, r.parent, r.aTok, 0, cited...); res == nil || res.Status != "completed" {
		t.Fatalf("the parent with an optional sub-task failed: %q %+v", msg, res)
	}
}
