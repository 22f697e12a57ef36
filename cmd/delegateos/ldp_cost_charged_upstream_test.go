package main

import (
	"net/http/httptest"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestLDPCostChargedUpstreamReported: under honour_upstream_cost the gate
// charges what the upstream reports (capped at the rule's max_cost), which
// the front cannot quote; the task's provenance states the cost the gate
// charged (its execution record, seen by the tap even without an audit
// log), never the rule's cost or its max_cost, and a report above max_cost
// is stated as the cap the gate charged (rtldp4, held).
func TestLDPCostChargedUpstreamReported(t *testing.T) {
	u := newPeerUpstream()
	env := mcptest.NewEnv(t)
	hs := httptest.NewServer(u)
	t.Cleanup(hs.Close)
	rule := mcptest.Priced("echo", 100)
	rule.MaxCost = 500
	pol := env.Policy(rule)
	pol.HonourUpstreamCost = true
	pol.Extra = peerSection
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, UpstreamURL: hs.URL + "/mcp", Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	for i, c := range []struct {
		reported string
		want     int64
	}{{"42", 42}, {"9000", 500}} {
		u.answers <- `"result":{"content":[{"type":"text","text":"ok"}],"_meta":{"delegateos/costMicrocents":` + c.reported + `}}`
		reply := peerSubmit(t, s, string(rune('a'+i)), "echo", `"x"`, nil)
		<-u.calls
		res, ok := reply.Body.(*ldp.TaskResult)
		if !ok {
			t.Fatalf("reported %s: %+v", c.reported, reply.Body)
		}
		got := res.Provenance.DelegateOS
		if got == nil || got.CostChargedMicrocents == nil || *got.CostChargedMicrocents != c.want {
			t.Fatalf("the upstream reported %s (max_cost 500): the task states %+v, want %d charged", c.reported, got, c.want)
		}
	}
}
