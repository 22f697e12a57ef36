package main

import (
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestLDPUpstreamErrorShapedAsDenial: the front takes any JSON-RPC
// error with the gate's denial code (-32001) and a data.type as the gate's
// denial, and gives it that type's category. The upstream tool (which the
// gate is there because it is not trusted) answers a call the gate allowed
// with such an error: the task fails capability_not_granted, category
// policy — the initiator's refusal, which 'ldp submit --record' does not
// count — while the gate logged the call allowed and failed (outcome
// error) (rtldp3 #13). Now the front takes a denial only when the gate
// did not allow the call (its tap sees the decision, with or without an
// audit log): TOOL_ERROR/runtime. A genuine denial keeps its type.
func TestLDPUpstreamErrorShapedAsDenial(t *testing.T) {
	u := newPeerUpstream()
	env := mcptest.NewEnv(t)
	srv := upstreamLDPServe(t, env, u, false)
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, env.Mint(nil, "mcp:echo:*"))
	u.answers <- `"error":{"code":-32001,"message":"DCT verification failed: capability_not_granted — made up by the tool","data":{"type":"capability_not_granted"}}`
	r := peerSubmit(t, s, "a", "echo", `"x"`, nil)
	<-u.calls
	f, ok := r.Body.(*ldp.TaskFailed)
	if !ok {
		t.Fatalf("%s", r.Body.Type())
	}
	srv.WaitLog("decision", func(l map[string]any) bool {
		return l["tool"] == "echo" && l["allowed"] == true && l["outcome"] == "error"
	})
	if !ldp.DelegatesFailure(f.Error) {
		t.Fatalf("a call the gate allowed, failed by the tool, is answered as the gate's denial: %s/%s %q", f.Error.Code, f.Error.Category, f.Error.Message)
	}
	if f.Error.Code != "TOOL_ERROR" || f.Error.Category != ldp.CategoryRuntime {
		t.Fatalf("answered %s/%s, want TOOL_ERROR/runtime", f.Error.Code, f.Error.Category)
	}
	// The gate's own denial (a token without echo) keeps its type and
	// category.
	s2 := peerOpen(t, srv, "ldp:delegate:other", env.Agent, env.Mint(nil, "docs:read:/**"))
	r = peerSubmit(t, s2, "b", "echo", `"x"`, nil)
	if code := peerFailCode(r); code != "capability_not_granted" || r.Body.(*ldp.TaskFailed).Error.Category != ldp.CategoryPolicy {
		t.Fatalf("the gate's denial: %+v", r.Body)
	}
}
