//go:build unix

package proxy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/redistest"
)

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
	rtStop(t, r.p)
	ctx := context.Background()
	if err := srv.Client().FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
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
