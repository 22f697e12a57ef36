package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/fsutil"
)

// wsPlans is the workspace directory of signed decomposition plans, where
// the gate finds them.
const wsPlans = gate.WorkspacePlans

var contractDecomposeCmd = &command{
	name:    "decompose",
	args:    "--contract PARENT --token TOKEN --plan FILE --key FILE --out DIR [--assignee ID] [--workspace DIR] [--spend-store FILE|URL] [--json]",
	summary: "split a contract into a signed plan of sub-tasks, each with its own signed contract and token, enforced by the gate",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		parent := fs.String("contract", "", "the parent contract file: the task being split")
		token := fs.String("token", "", "the parent token, bound to the parent contract and delegated to --key (@FILE reads a file)")
		planFile := fs.String("plan", "", "the plan file (YAML or JSON): strategy (sequential, parallel or dag) and subTasks with id, title, description, capabilities {namespace, action, resource}, budgetMicrocents, deadline, dependsOn, assignee")
		key := fs.String("key", "", "the decomposer's key file: the parent token's holder, who signs the plan, the child contracts and the sub-task tokens")
		out := fs.String("out", "", "the directory to write plan.json and, per sub-task ID, ID.contract.json and ID.token into")
		assignee := fs.String("assignee", "", "the principal (ID or did:key) of sub-tasks whose plan entry names none")
		ws := fs.String("workspace", ".", "the workspace whose "+wsPlans+"/ records the plan; the proxy enforcing it must use this workspace")
		spendStore := fs.String("spend-store", "", "the gate's spend store: what was spent under the parent token already is not given to sub-tasks")
		asJSON := fs.Bool("json", false, "print the signed plan as JSON instead of a summary")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			for _, f := range []struct{ flag, v string }{{"--contract", *parent}, {"--token", *token}, {"--plan", *planFile}, {"--key", *key}, {"--out", *out}} {
				if f.v == "" {
					return usagef("%s is required", f.flag)
				}
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			c, err := readContract(e, *parent)
			if err != nil {
				return err
			}
			tok, err := parseToken(e, *token)
			if err != nil {
				return err
			}
			raw, err := readDocument(e, "--plan", "@"+*planFile)
			if err != nil {
				return err
			}
			spec, err := contract.ReadPlanSpec(raw)
			if err != nil {
				return inputf("%s: %v", *planFile, err)
			}
			now := time.Now()
			// The chain's signatures are checked here; whether its root is
			// trusted is the gate's question when the tokens are used.
			v, err := dct.NewVerifier(dct.Options{Roots: []string{tok.Unverified().Authority.Issuer}})
			if err != nil {
				return inputf("the token: %v", err)
			}
			scope, err := v.VerifyChain(tok.String(), now)
			if err != nil {
				return checkError{"refused: the parent token does not verify: " + err.Error()}
			}
			var spent int64
			spentAt := map[string]int64{}
			key := gate.BudgetKey(tok)
			if *spendStore != "" {
				// Read, not opened: a running proxy holds the store.
				usage, err := budget.ReadUsage(*spendStore)
				if err != nil {
					return inputf("the spend store %s cannot be read: %v", *spendStore, err)
				}
				for _, u := range usage {
					spentAt[u.Key] = u.Committed + u.Reserved
				}
				spent = spentAt[key]
			}
			plans, err := contract.OpenPlanDir(filepath.Join(*ws, wsPlans))
			if err != nil {
				return inputf("workspace: %v", err)
			}
			pv, err := plans.View()
			if err != nil {
				return inputf("workspace: %v", err)
			}
			if why := pv.Unreadable(); why != "" {
				return inputf("workspace: what earlier plans allotted is unknown: %s", why)
			}
			// What earlier plans of the parent allotted to sub-tasks not
			// past their deadline, less their spend in the spend store.
			// Without the chain store a completed sub-task counts as open:
			// stricter than the proxy's in-band check, never looser.
			var allotted int64
			keys := tok.DelegationKeys()
			for _, p := range pv.SplitOf(keys[len(keys)-1]) {
				// A plan recorded under the ID the spec names is this one
				// again (recorded as it is, or refused as another plan
				// under its ID): it does not allot against itself.
				if p.Issuer == scope.Delegatee && (spec.ID == "" || p.ID != spec.ID) {
					allotted += gate.OpenAllotted(p, key, now, func(string) bool { return false }, func(k string) int64 { return spentAt[k] })
				}
			}
			d, err := contract.Decompose(contract.DecomposeParams{Key: k, Parent: c, Token: tok, Scope: scope, Spent: spent, Allotted: allotted,
				Spec: spec, Assignee: *assignee, Now: now})
			if err != nil {
				if errors.Is(err, contract.ErrPlan) {
					return checkError{"refused: " + err.Error()}
				}
				return usagef("%v", err)
			}
			if err := writeDecomposition(*out, d); err != nil {
				return err
			}
			if err := plans.Put(d.Plan); err != nil {
				return inputf("the plan cannot be recorded in the workspace: %v", err)
			}
			if *asJSON {
				return writeJSON(e, d.Plan)
			}
			fmt.Fprintf(e.stdout, "plan %s (%s) splits contract %s into %d sub-tasks, recorded in %s:\n", d.Plan.ID, d.Plan.Strategy, c.ID, len(d.Plan.SubTasks), filepath.Join(*ws, wsPlans))
			for _, st := range d.Plan.SubTasks {
				fmt.Fprintf(e.stdout, "  %s %q: contract %s, delegation %s to %s, %d microcents", st.ID, st.Title, st.ContractID, st.DelegationID, st.Assignee, st.BudgetMicrocents)
				if len(st.DependsOn) > 0 {
					fmt.Fprintf(e.stdout, ", after %v", st.DependsOn)
				}
				fmt.Fprintln(e.stdout)
			}
			return nil
		}
	},
}

// writeDecomposition writes the plan and each sub-task's contract and
// token (0600: it is a credential) into dir.
func writeDecomposition(dir string, d *contract.Decomposition) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return inputf("--out: %v", err)
	}
	write := func(name string, v any, mode os.FileMode) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := fsutil.WriteFileAtomic(filepath.Join(dir, name), append(b, '\n'), mode); err != nil {
			return inputf("write %s: %v", name, err)
		}
		return nil
	}
	if err := write("plan.json", d.Plan, 0o644); err != nil {
		return err
	}
	for i, st := range d.Plan.SubTasks {
		if err := write(st.ID+".contract.json", d.Contracts[i], 0o644); err != nil {
			return err
		}
		if err := fsutil.WriteFileAtomic(filepath.Join(dir, st.ID+".token"), []byte(d.Tokens[i].String()+"\n"), 0o600); err != nil {
			return inputf("write %s.token: %v", st.ID, err)
		}
	}
	return nil
}
