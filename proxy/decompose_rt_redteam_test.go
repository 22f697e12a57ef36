//go:build unix && redteam

package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red-team attacks on enforced decomposition (issue 22), rtdecomp. Each
// test FAILS while the bug it names is present. Run:
//
//	go test -count=1 -tags redteam -run 'TestRTDecomp' ./proxy/

// A recorded plan file damaged so that it no longer parses (truncated by
// a crash or a full disk, or edited by hand) is silently skipped by
// PlanDir.refresh (contract/plandir.go: `if err != nil { continue }` after
// ParsePlan): a proxy that reads the workspace afterwards binds nothing,
// and summarize runs before fetch completed. Same with an edit that keeps
// the JSON but changes summarize's delegationKey and the parent's: the
// "tampered" marks go to the keys the edited file names, not the real
// ones. And a deleted plan file: nothing remembers the plan was recorded. The builder's
// defence ("an edited plan file: every delegation it names is refused")
// only holds for edits that keep the file parsing and its keys intact.
func TestRTDecompDamagedPlanFileFreesSubTask(t *testing.T) {
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
			if got.RPC == nil || !strings.Contains(got.RPC.Message, "dependency_pending") {
				t.Errorf("BUG: after the plan file was damaged (%s), a fresh proxy let summarize run before fetch completed: %+v", tc.name, got)
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

// Every gate decision lists WORKSPACE/plans (PlanDir.refresh: os.ReadDir,
// which sorts every name, on each View), twice per call (Pending and
// Hold), whether or not any plan names the call's token. Its cost grows
// with the number of files there, and plans are never removed; in-band
// delegateos/decompose lets any agent with a recorded delegation add them
// (and, with the over-commit above, without a budget bound). Measured:
// mean decision latency of a call no plan names, with the one plan of
// the run and then with 20000 more entries in the directory.
func TestRTDecompPlanCountSlowsEveryDecision(t *testing.T) {
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
		t.Errorf("BUG: every decision pays for the number of plan files: %v with 1 plan, %v with %d more, for a token no plan names", base, many, n)
	}
}
