//go:build redteam && linux

package proxy_test

// Red-team tests of issue 19's Redis store history (branch wt-storegen):
// each is a fault the store's checks miss, through the real binaries on a
// real redis-server. They FAIL on the code under test (run them with
// go test -tags redteam -run TestRedTeam ./proxy/); see
// /work/wt/rtstore.report.md for the cause and a fix of each.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// RT8. store recover reads each audit log with Open (a log whose proxy
// still runs) and never says that a log does not end at its final
// checkpoint: a log cut back (its last entries removed, or its proxy
// killed) is rebuilt short, the reset is lifted, and nothing in the
// output names the log. The rebuilt spend is below what was forwarded.
func TestRedTeamRecoverSaysNothingOfATruncatedLog(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	log := filepath.Join(f.e.Dir, "audit.log")
	p, s := f.start(f.a, "proxy_key: "+f.e.KeyFile(mcptest.NewKey(t, "p"))+"\naudit_log: "+log+"\n", nil)
	n, _, _ := rtDrain(t, s, 20)
	f.rtSettled()
	rtStop(t, p)
	if err := f.srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	mcptest.WriteFile(t, log, strings.Join(lines[:len(lines)/2], ""))
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log)
	t.Logf("store recover: exit %d\n%s%s", code, out, errs)
	rebuilt := f.usage()[f.key(1)].Committed / fleetCost
	if code == 0 && rebuilt < n && !strings.Contains(out, log) {
		t.Errorf("store recover rebuilt %d of the %d calls forwarded, lifted the reset, and its output does not name %s, which ends without its final checkpoint", rebuilt, n, log)
	}
}
