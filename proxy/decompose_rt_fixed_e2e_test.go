//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/proxy"
)

// Red-team findings on enforced decomposition (issue 22, rtdecomp) that
// were fixed, kept in the normal suite asserting the fixed behaviour. Run:
//
//	go test -count=1 -run 'TestRTDecompFixed' ./proxy/

// F2: one unreadable plan-named entry in WORKSPACE/plans (here a
// directory) used to refuse every call of every token. Now only chains a
// plan could name as a sub-task (a delegated link) wait for it, and run
// again once the entry is gone; root tokens keep running.
func TestRTDecompFixedUnreadablePlanEntryScoped(t *testing.T) {
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
	if got := r.s.CallAs(t, fetchTok.String(), "read_file", fetchArgs); got.RPC == nil || !strings.Contains(got.RPC.Message, string(proxy.DependencyPending)) || !strings.Contains(got.RPC.Message, "cannot be read") {
		t.Fatalf("a sub-task ran while a plan entry cannot be read: %+v", got)
	}
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	r.s.CallAs(t, fetchTok.String(), "read_file", fetchArgs).OK(t, "fetch once the entry is gone")
}
