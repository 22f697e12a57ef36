//go:build unix

package proxy_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// The ended-delegation set lost with a FLUSHALL: a proxy started after it
// would take a completed delegation's token again. store recover
// --workspace records the endings the fleet's workspaces hold again, and a
// proxy started then refuses the token.
func TestE2EFaultFlushAllRecoversEndedDelegations(t *testing.T) {
	srv := redistest.Start(t)
	r := newDelegationRun(t)
	ws1 := filepath.Join(r.e.Dir, "ws1")
	r.p, r.s = startEndedWorkspace(t, r, srv, ws1)
	r.ws = ws1
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	if done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 100); done.Status != "completed" {
		t.Fatalf("complete: %+v", done)
	}
	srv.FlushAll()
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", srv.URL(), "--root", r.e.Root.ID(),
		"--audit", ws1+"-audit.log", "--workspace", ws1)
	if code != 0 || !strings.Contains(out, "recorded 1 ended delegations of 1 workspaces") {
		t.Fatalf("store recover --workspace: exit %d, %s%s", code, out, errs)
	}
	_, other := startEndedWorkspace(t, r, srv, filepath.Join(r.e.Dir, "ws2"))
	got := other.CallAs(t, r.bTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
	if typ, detail := denialData(got); typ != string(dct.Expired) || !strings.Contains(detail, delB+" has ended (completed)") {
		t.Fatalf("B's call at a proxy started after the recovery: %+v (%s: %s), want it refused as ended", got, typ, detail)
	}
}

// The ended-delegation set is grow-only: after a FLUSHALL, a proxy that
// knows an ending writes it back, so a proxy started afterwards refuses
// the completed delegation's token without an operator's recovery.
func TestE2EFaultFlushAllEndedWrittenBack(t *testing.T) {
	srv := redistest.Start(t)
	r := newDelegationRun(t)
	ws1 := filepath.Join(r.e.Dir, "ws1")
	r.p, r.s = startEndedWorkspace(t, r, srv, ws1)
	r.ws = ws1
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	if done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 100); done.Status != "completed" {
		t.Fatalf("complete: %+v", done)
	}
	ctx := context.Background()
	srv.FlushAll()
	mcptest.Eventually(t, "the running proxy to write the ending back", func() bool {
		n, err := srv.Client().HLen(ctx, "delegateos:ended").Result()
		return err == nil && n == 1
	})
	_, other := startEndedWorkspace(t, r, srv, filepath.Join(r.e.Dir, "ws2"))
	got := other.CallAs(t, r.bTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
	if typ, detail := denialData(got); typ != string(dct.Expired) || !strings.Contains(detail, delB+" has ended (completed)") {
		t.Fatalf("B's call at a proxy started after the FLUSHALL: %+v (%s: %s), want it refused as ended", got, typ, detail)
	}
}

// startEndedWorkspace starts a proxy of r's fleet on the workspace ws,
// sharing its ended delegations in the Redis srv, and connects to it.
func startEndedWorkspace(t *testing.T, r *delegationRun, srv *redistest.Server, ws string) (*mcptest.Process, *mcptest.Session) {
	t.Helper()
	revs := filepath.Join(r.e.Dir, filepath.Base(ws)+"-revocations.json")
	mcptest.WriteFile(t, revs, "[]\n")
	pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
	pol.Rules = pol.Rules[1:]
	pol.RevocationList = revs
	key := mcptest.NewKey(t, filepath.Base(ws))
	pol.Extra = "workspace: " + strconv.Quote(ws) + "\nended_delegations: " + strconv.Quote(srv.URL()) +
		"\nproxy_key: " + r.e.KeyFile(key) + "\naudit_log: " + filepath.Join(ws+"-audit.log") + "\n"
	p := r.e.StartProxy(mcptest.ProxyOptions{Policy: pol})
	return p, p.Connect(mcptest.SessionOptions{})
}

// The ended-delegation set lost while no proxy that knew the ending ran
// (stdio proxies run per session): a delegation completed at workspace
// ws1, ws1's proxy exits, FLUSHALL. A proxy of another workspace on the
// same machine restores the ending from the machine's durable copy of the
// set (in the state directory) before it decides, refuses the completed
// delegation's token as ended, and writes the ending back to Redis for the
// rest of the fleet (rtstore2 R2-9).
func TestE2EFaultEndedSetLostWhileNoProxyRuns(t *testing.T) {
	srv := redistest.Start(t)
	r := newDelegationRun(t)
	ws1 := filepath.Join(r.e.Dir, "ws1")
	r.p, r.s = startEndedWorkspace(t, r, srv, ws1)
	r.ws = ws1
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	if done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 100); done.Status != "completed" {
		t.Fatalf("complete: %+v", done)
	}
	stopProxy(t, r.p)
	ctx := context.Background()
	srv.FlushAll()
	// The workspace's own records cannot help the other workspace: only
	// the machine's copy can.
	if err := os.RemoveAll(ws1); err != nil {
		t.Fatal(err)
	}
	_, other := startEndedWorkspace(t, r, srv, filepath.Join(r.e.Dir, "ws2"))
	got := other.CallAs(t, r.bTok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
	if typ, detail := denialData(got); typ != string(dct.Expired) || !strings.Contains(detail, delB+" has ended (completed)") {
		t.Fatalf("completed delegation %s, its ending flushed while no proxy ran: a proxy of another workspace answered %+v (%s: %s); want it refused as ended", delB, got, typ, detail)
	}
	n, err := srv.Client().HLen(ctx, "delegateos:ended").Result()
	if err != nil || n != 1 {
		t.Fatalf("the ended set after the new proxy started: %d entries, %v; want the ending written back", n, err)
	}
}
