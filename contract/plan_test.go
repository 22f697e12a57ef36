package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
)

const testPlanYAML = `strategy: dag
subTasks:
  - id: fetch
    title: Fetch
    capabilities: [{namespace: docs, action: read, resource: /project/papers/*}]
    budgetMicrocents: 1000
  - id: search
    title: Search
    capabilities: [{namespace: web, action: search, resource: "*"}]
    budgetMicrocents: 1000
  - id: write
    title: Write
    capabilities: [{namespace: docs, action: read, resource: /project/**}]
    budgetMicrocents: 2000
    dependsOn: [fetch, search]
`

// testDecomposition splits the standard contract (root to alice) into
// three sub-tasks for bob.
func testDecomposition(t testing.TB) *Decomposition {
	t.Helper()
	parent := testContract(t)
	tok, err := dct.Create(dct.CreateParams{Issuer: rootKey, Delegatee: aliceKey.ID(), ContractID: parent.ID, DelegationID: "del_aaaaaaaaaaaa",
		Capabilities:  []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}, {Namespace: "web", Action: "search", Resource: "*"}},
		MaxChainDepth: 2, MaxBudgetMicrocents: 5000, ExpiresAt: t0.Add(24 * time.Hour), IssuedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	v, err := dct.NewVerifier(dct.Options{Roots: []string{rootKey.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := v.VerifyChain(tok.String(), t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ReadPlanSpec([]byte(testPlanYAML))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decompose(DecomposeParams{Key: aliceKey, Parent: parent, Token: tok, Scope: scope, Spec: spec, Assignee: bobKey.ID(), Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDecomposeBindsEachSubTask(t *testing.T) {
	d := testDecomposition(t)
	if err := d.Plan.Verify(); err != nil {
		t.Fatal(err)
	}
	for i, st := range d.Plan.SubTasks {
		c, tok := d.Contracts[i], d.Tokens[i]
		keys := tok.DelegationKeys()
		u := tok.Unverified()
		last := u.Attenuations[len(u.Attenuations)-1]
		if c.ID != st.ContractID || last.ContractID != c.ID || keys[len(keys)-1] != st.DelegationKey || last.Delegatee != bobKey.ID() ||
			*last.MaxBudgetMicrocents != st.BudgetMicrocents || c.Issuer != aliceKey.ID() || keys[len(keys)-2] != d.Plan.ParentDelegationKey {
			t.Errorf("sub-task %s is not bound to its contract and token: %+v", st.ID, st)
		}
	}
	if got := d.Plan.SubTask("write").DependsOn; !reflect.DeepEqual(got, []string{"fetch", "search"}) {
		t.Errorf("dependsOn %v", got)
	}
}

// TestPlanTamper: the signature covers every member, so changing any of
// them is caught, and a plan re-signed by someone else is another
// issuer's plan.
func TestPlanTamper(t *testing.T) {
	d := testDecomposition(t)
	good, err := d.Plan.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	edits := map[string]func(p *Plan){
		"id":                 func(p *Plan) { p.ID = "plan_000000000000" },
		"parentContractId":   func(p *Plan) { p.ParentContractID = "ct_000000000000" },
		"strategy":           func(p *Plan) { p.Strategy = StrategyParallel; p.SubTasks[2].DependsOn = []string{} },
		"createdAt":          func(p *Plan) { p.CreatedAt = "2026-01-01T00:00:01.000Z" },
		"issuer":             func(p *Plan) { p.Issuer = evilKey.ID() },
		"parentDelegationId": func(p *Plan) { p.ParentDelegationID = "del_bbbbbbbbbbbb" },
		"parentDelegationKey": func(p *Plan) {
			p.ParentDelegationKey = p.SubTasks[0].DelegationKey
			p.SubTasks[0].DelegationKey = d.Plan.ParentDelegationKey
		},
		"subTask.id":          func(p *Plan) { p.SubTasks[0].ID = "fetch2"; p.SubTasks[2].DependsOn[0] = "fetch2" },
		"subTask.title":       func(p *Plan) { p.SubTasks[0].Title = "x" },
		"subTask.description": func(p *Plan) { p.SubTasks[0].Description = "x" },
		"subTask.capability":  func(p *Plan) { p.SubTasks[0].Capabilities[0].Resource = "/**" },
		"subTask.budget":      func(p *Plan) { p.SubTasks[0].BudgetMicrocents++ },
		"subTask.deadline":    func(p *Plan) { p.SubTasks[0].Deadline = "2026-01-01T01:00:00.000Z" },
		"subTask.dependsOn":   func(p *Plan) { p.SubTasks[2].DependsOn = []string{"fetch"} },
		"subTask.assignee":    func(p *Plan) { p.SubTasks[0].Assignee = evilKey.ID() },
		"subTask.contractId":  func(p *Plan) { p.SubTasks[0].ContractID = "ct_000000000001" },
		"subTask.delegation":  func(p *Plan) { p.SubTasks[0].DelegationID = "del_000000000001" },
		"subTask.key": func(p *Plan) {
			p.SubTasks[0].DelegationKey, p.SubTasks[1].DelegationKey = p.SubTasks[1].DelegationKey, p.SubTasks[0].DelegationKey
		},
		"subTask.order":   func(p *Plan) { p.SubTasks[0], p.SubTasks[1] = p.SubTasks[1], p.SubTasks[0] },
		"subTask.dropped": func(p *Plan) { p.SubTasks = p.SubTasks[:2] },
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePlan(good)
			if err != nil {
				t.Fatal(err)
			}
			edit(p)
			if err := p.Verify(); !errors.Is(err, ErrPlan) {
				t.Fatalf("an edited plan verifies: %v", err)
			}
			// Re-signed, it verifies, but as evil's: the gate binds a plan
			// only to delegations its issuer signed.
			if err := p.Sign(evilKey); err != nil {
				t.Fatal(err)
			}
			if err := p.Verify(); err != nil || p.Issuer == aliceKey.ID() {
				t.Fatalf("re-signed: %v, issuer %s", err, p.Issuer)
			}
		})
	}
}

func TestParsePlanRefusesLoss(t *testing.T) {
	good, err := testDecomposition(t).Plan.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{
		bytes.Replace(good, []byte(`"dependsOn":[]`), []byte(`"dependsOn":null`), 1),
		bytes.Replace(good, []byte(`"strategy"`), []byte(`"Strategy"`), 1),
		bytes.Replace(good, []byte(`{"createdAt"`), []byte(`{"extra":1,"createdAt"`), 1),
		bytes.Replace(good, []byte(`"budgetMicrocents":1000`), []byte(`"budgetMicrocents":1000.0`), 1),
	} {
		if bytes.Equal(bad, good) {
			t.Fatal("the edit did not apply")
		}
		if _, err := ParsePlan(bad); !errors.Is(err, ErrPlan) {
			t.Errorf("%s parses: %v", bad, err)
		}
	}
}

// FuzzParsePlan: ParsePlan never panics, and a plan that parses marshals
// to bytes that parse back to the same plan with the same verdict.
func FuzzParsePlan(f *testing.F) {
	good, err := testDecomposition(f).Plan.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(indent(f, good))
	f.Add(bytes.Replace(good, []byte(`"dependsOn":["fetch","search"]`), []byte(`"dependsOn":["write"]`), 1))
	f.Add([]byte(`{"id":"plan_000000000000","subTasks":[{"id":"a","dependsOn":["a"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePlan(data)
		if err != nil {
			return
		}
		verr := p.Verify()
		out, err := p.Marshal()
		if err != nil {
			t.Fatalf("a parsed plan does not marshal: %v", err)
		}
		back, err := ParsePlan(out)
		if err != nil {
			t.Fatalf("%s does not parse back: %v", out, err)
		}
		if !reflect.DeepEqual(back, p) {
			t.Fatalf("round trip changed the plan:\n%+v\n%+v", p, back)
		}
		if (back.Verify() == nil) != (verr == nil) {
			t.Fatalf("Verify changed its answer over a round trip: %v", verr)
		}
		if findCycle(p.SubTasks) != nil {
			t.Fatalf("a plan with a cycle parsed: %s", data)
		}
	})
}

// FuzzReadPlanSpec: the plan file reader never panics, and what it reads
// encodes as JSON.
func FuzzReadPlanSpec(f *testing.F) {
	f.Add([]byte(testPlanYAML))
	f.Add([]byte(`{"strategy":"parallel","subTasks":[{"id":"a","budgetMicrocents":1}]}`))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("strategy: dag\nstrategy: dag\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadPlanSpec(data)
		if err != nil {
			if !errors.Is(err, ErrPlan) {
				t.Fatalf("an error without ErrPlan: %v", err)
			}
			return
		}
		for _, st := range s.SubTasks {
			for _, v := range []json.RawMessage{st.OutputSchema, st.Verification} {
				if v != nil && !json.Valid(v) {
					t.Fatalf("invalid JSON %s", v)
				}
			}
		}
		_ = strings.TrimSpace(s.Strategy)
	})
}

// BenchmarkPlanView is what the gate pays per call for plans: one look
// at the plan directory (here holding one plan) and the index lookups.
func BenchmarkPlanView(b *testing.B) {
	d, err := OpenPlanDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	p := testDecomposition(b).Plan
	if err := d.Put(p); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		v, err := d.View()
		if err != nil || len(v.SubTaskOf(p.SubTasks[0].DelegationKey)) != 1 {
			b.Fatal("the plan is not indexed", err)
		}
	}
}

// TestCheckDecomposition: an in-band decomposition passes only if each
// sub-task's token is exactly what its plan entry says. Each case swaps a
// sub-task's token for one that differs in one respect (the plan re-signed
// with the new token's key, so only that respect is wrong).
func TestCheckDecomposition(t *testing.T) {
	now := t0.Add(time.Minute)
	check := func(d *Decomposition) error {
		t.Helper()
		u := d.Tokens[0].Unverified()
		// The parent token is the sub-task token less its last block.
		parent, err := dct.Create(dct.CreateParams{Issuer: rootKey, Delegatee: aliceKey.ID(), ContractID: u.Authority.ContractID, DelegationID: u.Authority.DelegationID,
			Capabilities: u.Authority.Capabilities, MaxChainDepth: u.Authority.MaxChainDepth, MaxBudgetMicrocents: u.Authority.MaxBudgetMicrocents,
			ExpiresAt: t0.Add(24 * time.Hour), IssuedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := dct.NewVerifier(dct.Options{Roots: []string{rootKey.ID()}})
		scope, err := v.VerifyChain(parent.String(), now)
		if err != nil {
			t.Fatal(err)
		}
		return CheckDecomposition(d, testContract(t), parent, scope, 0, 0, now)
	}
	if err := check(testDecomposition(t)); err != nil {
		t.Fatalf("the decomposition Decompose made: %v", err)
	}
	caps := func(r string) *[]dct.Capability {
		return &[]dct.Capability{{Namespace: "docs", Action: "read", Resource: r}}
	}
	budget := func(n int64) *int64 { return &n }
	due := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	for name, tc := range map[string]struct {
		mod  func(p *dct.AttenuateParams)
		want string
	}{
		"wider capability": {func(p *dct.AttenuateParams) { p.Capabilities = caps("/project/**") }, "capabilities are not the plan's"},
		"bigger budget":    {func(p *dct.AttenuateParams) { p.MaxBudgetMicrocents = budget(1001) }, "budget is not the plan's 1000"},
		"later expiry":     {func(p *dct.AttenuateParams) { p.ExpiresAt = due(23 * time.Hour) }, "expires after the plan's deadline"},
		"no expiry":        {func(p *dct.AttenuateParams) { p.ExpiresAt = nil }, "has no expiry of its own"},
		"other assignee":   {func(p *dct.AttenuateParams) { p.Delegatee = evilKey.ID() }, "not what the plan says"},
		"other contract":   {func(p *dct.AttenuateParams) { p.ContractID = "ct_0000000000ff" }, "not what the plan says"},
	} {
		t.Run(name, func(t *testing.T) {
			d := testDecomposition(t)
			d.Plan.SubTasks[0].Deadline = "2026-01-01T12:00:00.000Z"
			st := &d.Plan.SubTasks[0]
			p := dct.AttenuateParams{Attenuator: aliceKey, Delegatee: st.Assignee, DelegationID: st.DelegationID, ContractID: st.ContractID,
				Capabilities: &[]dct.Capability{st.Capabilities[0]}, MaxBudgetMicrocents: budget(st.BudgetMicrocents), ExpiresAt: due(12 * time.Hour), Now: now}
			tc.mod(&p)
			u := d.Tokens[0].Unverified()
			parent, err := dct.Create(dct.CreateParams{Issuer: rootKey, Delegatee: aliceKey.ID(), ContractID: u.Authority.ContractID, DelegationID: u.Authority.DelegationID,
				Capabilities: u.Authority.Capabilities, MaxChainDepth: u.Authority.MaxChainDepth, MaxBudgetMicrocents: u.Authority.MaxBudgetMicrocents,
				ExpiresAt: t0.Add(24 * time.Hour), IssuedAt: t0})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := dct.Attenuate(parent, p)
			if err != nil {
				t.Fatal(err)
			}
			keys := tok.DelegationKeys()
			d.Tokens[0], st.DelegationKey = tok, keys[len(keys)-1]
			if err := d.Plan.Sign(aliceKey); err != nil {
				t.Fatal(err)
			}
			if err := check(d); !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
