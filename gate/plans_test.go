package gate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
)

// A sub-task that is never delegated holds its parent's completion until
// its deadline, and then counts as failed (or, optional, not at all), so
// a plan with an abandoned step does not hold the parent forever.
func TestSplitNeverStartedSubTask(t *testing.T) {
	for _, optional := range []bool{false, true} {
		f := newDelegationFixture(t)
		plans, err := contract.OpenPlanDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		f.d.Plans = plans
		v, _ := dct.NewVerifier(dct.Options{Roots: []string{f.root.ID()}})
		scope, err := v.VerifyChain(f.aTok.String(), f.now)
		if err != nil {
			t.Fatal(err)
		}
		yaml := "strategy: parallel\nsubTasks:\n" +
			"  - {id: x, title: X, capabilities: [{namespace: docs, action: read, resource: /project/x}], budgetMicrocents: 100, deadline: 2026-11-22T12:10:00Z}\n" +
			"  - {id: y, title: Y, capabilities: [{namespace: docs, action: read, resource: /project/y}], budgetMicrocents: 100, deadline: 2026-11-22T12:20:00Z, optional: " + map[bool]string{false: "false", true: "true"}[optional] + "}\n"
		spec, err := contract.ReadPlanSpec([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		dec, err := contract.Decompose(contract.DecomposeParams{Key: f.a, Parent: f.aContract, Token: f.aTok, Scope: scope, Spec: spec, Assignee: f.b.ID(), Now: f.now})
		if err != nil {
			t.Fatal(err)
		}
		if err := plans.Put(dec.Plan); err != nil {
			t.Fatal(err)
		}
		for _, p := range []json.RawMessage{f.params(f.aContract, f.aTok, "del_aaaaaaaaaaaa", dct.RootParentDelegationID),
			f.params(dec.Contracts[0], dec.Tokens[0], dec.Plan.SubTasks[0].DelegationID, "del_aaaaaaaaaaaa")} {
			if res, _, err := f.d.Delegate(p); err != nil || !res.Accepted {
				t.Fatalf("delegate: %+v %v", res, err)
			}
		}
		xa, err := attest.Create(f.b, attest.CreateParams{ContractID: dec.Contracts[0].ID, DelegationID: dec.Plan.SubTasks[0].DelegationID, Success: true,
			Output: json.RawMessage(`{}`), DurationMs: 1}, f.now)
		if err != nil {
			t.Fatal(err)
		}
		xb, _ := json.Marshal(xa)
		cp, _ := json.Marshal(CompleteParams{DelegationID: dec.Plan.SubTasks[0].DelegationID, Attestation: xb})
		if res, err := f.d.Complete(context.Background(), cp); err != nil || res.Status != "completed" {
			t.Fatalf("complete x: %+v %v", res, err)
		}
		parent := func() (CompleteResult, error) {
			a, err := attest.Create(f.a, attest.CreateParams{ContractID: f.aContract.ID, DelegationID: "del_aaaaaaaaaaaa", Success: true,
				Output: json.RawMessage(`{"summary":"a long enough summary"}`), DurationMs: 1, Children: []string{xa.ID}}, f.now)
			if err != nil {
				t.Fatal(err)
			}
			ab, _ := json.Marshal(a)
			p, _ := json.Marshal(CompleteParams{DelegationID: "del_aaaaaaaaaaaa", Attestation: ab})
			return f.d.Complete(context.Background(), p)
		}
		if _, err := parent(); err == nil || !strings.Contains(err.Error(), `sub-task "y" (delegation `+dec.Plan.SubTasks[1].DelegationID+`) has not ended (not started)`) {
			t.Fatalf("the parent completed while y could still start: %v", err)
		}
		f.now = f.now.Add(21 * time.Minute)
		res, err := parent()
		want := map[bool]string{false: "failed", true: "completed"}[optional]
		if err != nil || res.Status != want {
			t.Fatalf("optional %v: the parent after y's deadline: %+v %v, want %s", optional, res, err, want)
		}
		if !optional && !strings.Contains(strings.Join(res.Problems, "\n"), `sub-task "y" of plan `+dec.Plan.ID+" was never started before its deadline 2026-11-22T12:20:00Z") {
			t.Errorf("problems: %v", res.Problems)
		}
	}
}
