//go:build unix && redteam

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
