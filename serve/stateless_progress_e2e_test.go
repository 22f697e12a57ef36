package serve_test

import (
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A stateless (MCP 2026-07-28) request gets its progress from a stdio
// upstream that, as the SDKs of earlier revisions do, sends nothing of its
// own before notifications/initialized: the shared relay initializes its
// upstream as a session's client would.
func TestServeStatelessProgressFromStrictUpstream(t *testing.T) {
	e := mcptest.NewEnv(t)
	up := mcptest.Build(t, "./internal/cmd/strictupstream", false)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:slow:*"), Upstream: []string{up}})
	for _, id := range []string{`"s1"`, `"s2"`} {
		st := srv.PostStream("", stateless, statelessSlow(id, 1, 0, `"tok"`))
		var got []string
		for m := st.Next(); m != nil; m = st.Next() {
			if m["method"] != nil {
				got = append(got, m["method"].(string))
			} else if m["result"] != nil {
				got = append(got, "result")
			} else {
				got = append(got, mcptest.JSON(m))
			}
		}
		if len(got) != 2 || got[0] != "notifications/progress" || got[1] != "result" {
			t.Fatalf("stateless call %s: %v, want its progress then its result", id, got)
		}
	}
	srv.WaitLog("upstream started", nil)
	if n := len(srv.LogWith("upstream started", nil)); n != 1 {
		t.Fatalf("%d upstreams for the stateless requests of one credential, want 1", n)
	}
}
