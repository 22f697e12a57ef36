//go:build unix

package proxy_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// A delegation completed at one proxy is refused at another that shares
// the ended-delegation set, though only the first has it in its
// workspace; chain show --ended shows it completed.
func TestE2EFleetEndedDelegationShared(t *testing.T) {
	srv := redistest.Start(t)
	r := newDelegationRun(t) // its proxy has no Redis: replaced below
	start := func(ws string) (*mcptest.Process, *mcptest.Session) {
		revs := filepath.Join(r.e.Dir, filepath.Base(ws)+"-revocations.json")
		mcptest.WriteFile(t, revs, "[]\n")
		pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
		pol.Rules = pol.Rules[1:]
		pol.RevocationList = revs
		pol.Extra = "workspace: " + strconv.Quote(ws) + "\nended_delegations: " + strconv.Quote(srv.URL()) + "\n"
		p := r.e.StartProxy(mcptest.ProxyOptions{Policy: pol})
		return p, p.Connect(mcptest.SessionOptions{})
	}
	ws1 := filepath.Join(r.e.Dir, "ws1")
	r.p, r.s = start(ws1)
	r.ws = ws1
	_, other := start(filepath.Join(r.e.Dir, "ws2"))
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	read := func() mcptest.Result {
		return other.CallAs(t, r.bTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
	}
	read().OK(t, "B's call at the other proxy before B completed")
	if done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 100); done.Status != "completed" {
		t.Fatalf("complete: %+v", done)
	}
	mcptest.Eventually(t, "the other proxy to refuse B's token", func() bool {
		got := read()
		typ, detail := denialData(got)
		if got.Err == nil && !got.Res.IsError {
			return false
		}
		if typ != string(dct.Expired) || !strings.Contains(detail, delB+" has ended (completed)") {
			t.Fatalf("B's call after B completed: %s: %s", typ, detail)
		}
		return true
	})
	var ds []struct{ ID, Status string }
	out := r.cli("chain", "show", "--workspace", filepath.Join(r.e.Dir, "ws2"), "--ended", srv.URL(), "--json")
	if err := json.Unmarshal([]byte(out), &ds); err != nil {
		t.Fatal(err)
	}
	// The other proxy recorded no delegation: its chain is empty, and the
	// set is what tells it B ended.
	if len(ds) != 0 {
		t.Errorf("the other workspace records %v", ds)
	}
	out = r.cli("chain", "show", "--workspace", ws1, "--ended", srv.URL(), "--json")
	if !strings.Contains(out, `"status": "completed"`) {
		t.Errorf("chain show --ended: %s", out)
	}
	// A stalled Redis: within about a second (the copy answers only while
	// Redis was heard from within the last second) the other proxy denies
	// with store_unavailable.
	srv.Pause()
	defer srv.Resume()
	mcptest.Eventually(t, "a store_unavailable denial while Redis is stalled", func() bool {
		got := other.CallAs(t, r.aTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
		typ, detail := denialData(got)
		if typ != "" && typ != string(gate.StoreUnavailable) {
			t.Fatalf("a call while Redis is stalled: %s: %s", typ, detail)
		}
		return typ == string(gate.StoreUnavailable)
	})
}
