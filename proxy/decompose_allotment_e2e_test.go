//go:build unix

package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red-team findings on enforced decomposition (issue 22, rtdecomp) that
// were fixed (Fn), kept in the normal suite asserting the fixed behaviour.
// Every decomposition test runs with:
//
//	go test -count=1 -run 'TestDecomposition' ./proxy/

// F2: one unreadable plan-named entry in WORKSPACE/plans (here a
// directory) used to refuse every call of every token. Now only chains a
// plan could name as a sub-task (a delegated link) wait for it, and run
// again once the entry is gone; root tokens keep running.
// Found by the red team of decomposition, fixed (was TestRTDecompFixedUnreadablePlanEntryScoped).
func TestDecompositionUnreadablePlanEntryScoped(t *testing.T) {
	r := newPlanRun(t, planE2E, 10000)
	args := map[string]any{"path": "/project/secret.md"}
	unrelated := r.e.Mint(func(p *dct.CreateParams) { p.MaxBudgetMicrocents = 5000 }, "docs:read:/project/**")
	r.s.CallAs(t, unrelated.String(), "read_file", args).OK(t, "precondition: a token no plan names")
	r.s.CallAs(t, r.aTok.String(), "read_file", args).OK(t, "precondition: the decomposer")
	bad := filepath.Join(r.ws, "plans", "plan_0123456789ab.json")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	r.s.CallAs(t, unrelated.String(), "read_file", args).OK(t, "a token no plan can name, with an unreadable plan entry")
	r.s.CallAs(t, r.aTok.String(), "read_file", args).OK(t, "a root token, with an unreadable plan entry")
	_, fetchTok := r.sub("fetch")
	fetchArgs := map[string]any{"path": "/project/sub/notes.md"}
	if got := r.s.CallAs(t, fetchTok.String(), "read_file", fetchArgs); got.RPC == nil || !strings.Contains(got.RPC.Message, string(gate.DependencyPending)) || !strings.Contains(got.RPC.Message, "cannot be read") {
		t.Fatalf("a sub-task ran while a plan entry cannot be read: %+v", got)
	}
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	r.s.CallAs(t, fetchTok.String(), "read_file", fetchArgs).OK(t, "fetch once the entry is gone")
}

// F5: // A sub-task whose deadline passed without it ever being delegated counts
// as failed for its parent's completion (gate/plans.go splitBy,
// pastDeadline), and its token has expired so it can spend nothing. Hold
// used to keep its whole allotment off the parent's level forever; now
// the hold ends at the sub-task's deadline, and the decomposer spends the
// 9000 that "late" (never started, expired) was allotted. The wait is on the proxy's own clock: late's token is polled
// with a call outside its capabilities (refused without spending) until
// the proxy answers "expired".
// Found by the red team of decomposition, fixed (was TestRTDecompFixedExpiredSubTaskAllotmentReturns).
func TestDecompositionExpiredSubTaskAllotmentReturns(t *testing.T) {
	deadline := time.Now().Add(5 * time.Second).UTC().Format(time.RFC3339)
	r := newPlanRun(t, `strategy: parallel
subTasks:
  - {id: late, title: Late, capabilities: [{namespace: docs, action: read, resource: /project/**}], budgetMicrocents: 9000, deadline: "`+deadline+`"}
`, 10000)
	_, lateTok := r.sub("late")
	args := map[string]any{"path": "/project/README.md"}
	if n := r.burst(r.aTok, 15); n != 10 {
		t.Fatalf("precondition: the decomposer made %d calls of 100 with 9000 of 10000 held, want 10", n)
	}
	for {
		got := r.s.CallAs(t, lateTok.String(), "read_file", map[string]any{"path": "/etc/passwd"})
		if got.RPC != nil && strings.Contains(got.RPC.Message, string(dct.Expired)) {
			break
		}
		if got.RPC == nil || !strings.Contains(got.RPC.Message, string(dct.CapabilityNotGranted)) {
			t.Fatalf("polling late's token: %+v", got)
		}
	}
	r.s.CallAs(t, r.aTok.String(), "read_file", args).OK(t, "the decomposer once sub-task \"late\" expired unstarted (its 9000 return)")
}

// F3: a plan is checked against the parent's budget less what was spent
// AND what earlier plans of the parent allotted to sub-tasks not ended.
// CLI: plan 1 allots 3000+3000 of 10000; a second plan allotting 10000 is
// refused (it used to be accepted, and its hold then starved fetch), one
// allotting the 4000 left is accepted, and fetch still runs.
// Found by the red team of decomposition, fixed (was TestRTDecompFixedSecondPlanWithinWhatIsLeft).
func TestDecompositionSecondPlanWithinWhatIsLeft(t *testing.T) {
	r := newPlanRun(t, planE2E, 10000)
	_, fetchTok := r.sub("fetch")
	decompose := func(name string, budget int) (string, int) {
		mcptest.WriteFile(t, filepath.Join(r.e.Dir, name+".yaml"), `strategy: parallel
subTasks:
  - {id: again, title: Again, capabilities: [{namespace: docs, action: read, resource: /project/**}], budgetMicrocents: `+strconv.Itoa(budget)+`}
`)
		_, stderr, code := mcptest.CLI(t, "contract", "decompose", "--contract", filepath.Join(r.e.Dir, "parent.json"), "--token", "@"+filepath.Join(r.e.Dir, "a.tok"),
			"--plan", filepath.Join(r.e.Dir, name+".yaml"), "--key", filepath.Join(r.e.Dir, "agent.key"), "--assignee", r.b.ID(), "--workspace", r.ws, "--out", filepath.Join(r.e.Dir, name))
		return stderr, code
	}
	if stderr, code := decompose("over", 10000); code == 0 || !strings.Contains(stderr, "6000 allotted by earlier plans") {
		t.Fatalf("a second plan allotting 10000 of a 10000 budget while the first holds 6000: exit %d, %s", code, stderr)
	}
	if stderr, code := decompose("within", 4000); code != 0 {
		t.Fatalf("a second plan allotting the 4000 left was refused: %s", stderr)
	}
	r.s.CallAs(t, fetchTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"}).OK(t, "fetch, allotted 3000 by the first plan")
}

// F3 in-band: delegateos/decompose plans of 3×1000 for one delegation
// with a budget of 10000: three are accepted, the next ones are refused
// (it used to accept every one, unbounded).
// Found by the red team of decomposition, fixed (was TestRTDecompFixedInBandPlansWithinBudget).
func TestDecompositionInBandPlansWithinBudget(t *testing.T) {
	r := newPlanRun(t, "", 10000)
	if res := r.delegate(r.parent, r.aTok, dct.RootParentDelegationID); !res.Accepted {
		t.Fatalf("delegate parent: %+v", res)
	}
	accepted := 0
	for range 5 {
		res := r.sendDecompose(r.inBand(r.e.Agent, r.aTok, planParallel), "")
		if res.Accepted {
			accepted++
		} else if !strings.Contains(res.Details, "allotted by earlier plans") {
			t.Fatalf("refused for another reason: %+v", res)
		}
	}
	if accepted != 3 {
		t.Errorf("%d in-band plans allotting 3000 each were accepted for one delegation with a budget of 10000, want 3", accepted)
	}
}

// decisionCost is the mean gate latency (the proxy's own "latency" of a
// decision, as logged) of n sequential allowed calls under tok.
func decisionCost(t *testing.T, r *planRun, tok *dct.Token, n int) time.Duration {
	t.Helper()
	del := planDelegation(tok)
	before := len(r.p.LogWith("decision", func(m map[string]any) bool { return m["delegation"] == del }))
	for range n {
		r.s.CallAs(t, tok.String(), "read_file", map[string]any{"path": "/project/README.md"}).OK(t, "a call under a token no plan names")
	}
	var entries []map[string]any
	for {
		entries = r.p.LogWith("decision", func(m map[string]any) bool { return m["delegation"] == del })
		if len(entries) >= before+n {
			break
		}
		r.p.WaitLog("decision", func(m map[string]any) bool { return m["delegation"] == del })
	}
	var sum float64
	for _, m := range entries[before : before+n] {
		sum += m["latency"].(float64)
	}
	return time.Duration(sum / float64(n) * float64(time.Second))
}

// F4: every gate decision used to list WORKSPACE/plans (os.ReadDir on
// each View, twice per call), a cost linear in the number of plan files
// (≈1.4 µs each, 33 ms with 20000). Now a look lists the directory only
// when it changed (one os.Stat otherwise; see contract
// TestPlanDirListsOnlyOnChange for the exact count). Measured:
// mean decision latency of a call no plan names, with the one plan of
// the run and then with 20000 more entries in the directory.
// Found by the red team of decomposition, fixed (was TestRTDecompFixedPlanCountDoesNotSlowDecisions).
func TestDecompositionPlanCountDoesNotSlowDecisions(t *testing.T) {
	r := newPlanRun(t, planE2E, 10000)
	tok := r.e.Mint(func(p *dct.CreateParams) { p.MaxBudgetMicrocents = 1_000_000 }, "docs:read:/project/**")
	base := decisionCost(t, r, tok, 40)
	plans := filepath.Join(r.ws, "plans")
	const n = 20000
	for i := range n {
		if err := os.WriteFile(filepath.Join(plans, fmt.Sprintf("plan_%012x.json", 0x100000+i)), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	decisionCost(t, r, tok, 1) // the first look reads each new file once
	many := decisionCost(t, r, tok, 40)
	t.Logf("mean decision latency: %v with 1 plan, %v with %d more plan files (x%.1f)", base, many, n, float64(many)/float64(base))
	if many > 10*base && many > time.Millisecond {
		t.Errorf("every decision pays for the number of plan files: %v with 1 plan, %v with %d more, for a token no plan names", base, many, n)
	}
}

// F1: a recorded plan file damaged so that it no longer parses
// (truncated by a crash, or edited), edited keeping its JSON but changing
// summarize's delegationKey and the parent's, or deleted, used to free its
// sub-tasks for a proxy that reads the workspace afterwards. Now Put
// records the delegations a plan covers in WORKSPACE/plans/bindings.jsonl
// first, and a delegation bound to a plan that is missing or does not
// verify is refused (dependency_pending) until the plan is restored.
// Found by the red team of decomposition, fixed (was TestRTDecompFixedDamagedPlanFileKeepsSubTaskRefused).
func TestDecompositionDamagedPlanFileKeepsSubTaskRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(b []byte, sumKey string) []byte
	}{
		{"truncated", func(b []byte, _ string) []byte { return b[:len(b)/2] }},
		{"deleted", func([]byte, string) []byte { return nil }},
		{"sub-task and parent keys edited", func(b []byte, keys string) []byte {
			// keys is "sumKey parentKey": both are marked tampered only
			// under their edited values.
			f := strings.Fields(keys)
			s := string(b)
			s = strings.Replace(s, `"delegationKey":"`+f[0]+`"`, `"delegationKey":"`+flipLast(f[0])+`"`, 1)
			s = strings.Replace(s, `"parentDelegationKey":"`+f[1]+`"`, `"parentDelegationKey":"`+flipLast(f[1])+`"`, 1)
			return []byte(s)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPlanRun(t, planE2E, 10000)
			_, sumTok := r.sub("summarize")
			keys := sumTok.DelegationKeys()
			args := map[string]any{"path": "/project/secret.md"}
			if got := r.s.CallAs(t, sumTok.String(), "read_file", args); got.RPC == nil || !strings.Contains(got.RPC.Message, "dependency_pending") {
				t.Fatalf("precondition: summarize ran before fetch: %+v", got)
			}
			path := filepath.Join(r.ws, "plans", r.plan.ID+".json")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			pkeys := r.aTok.DelegationKeys()
			edited := tc.edit(b, keys[len(keys)-1]+" "+pkeys[len(pkeys)-1])
			switch {
			case edited == nil:
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			case string(edited) == string(b):
				t.Fatalf("the edit did not apply to %s", b)
			default:
				mcptest.WriteFile(t, path, string(edited))
			}
			r.restartOnWorkspace()
			got := r.s.CallAs(t, sumTok.String(), "read_file", args)
			if got.RPC == nil || !strings.Contains(got.RPC.Message, "dependency_pending") || !strings.Contains(got.RPC.Message, "missing or does not verify") {
				t.Errorf("after the plan file was damaged (%s), a fresh proxy let summarize run before fetch completed: %+v", tc.name, got)
			}
		})
	}
}

func flipLast(s string) string {
	if s[len(s)-1] == 'A' {
		return s[:len(s)-1] + "B"
	}
	return s[:len(s)-1] + "A"
}
