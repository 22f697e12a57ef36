//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// `store recover` given the same audit log twice (the same file under two
// names: a copy made by a log shipper, a backup beside the original).
// Before, each copy's calls were charged: 10 calls forwarded were rebuilt
// as 20 ("20 allowed calls in 2 audit logs"), `delegateos spend` showed
// 20, and the fleet lost 10 calls of its budget (20 on 30 forwarded in
// all). Now a call (its audit ID) an earlier log gave is counted once,
// and the result names the log that repeats it.
func TestE2EFaultRecoverSameLogTwiceCountedOnce(t *testing.T) {
	f := newStoreFleet(t)
	log := filepath.Join(f.e.Dir, "audit-1.log")
	p, s := f.start(f.a, f.audited("p1", log), nil)
	n, _, _ := drain(t, s, 10)
	f.settled()
	stopProxy(t, p)
	f.srv.FlushAll()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	copyLog := filepath.Join(f.e.Dir, "shipped", "audit-1.log")
	if err := os.MkdirAll(filepath.Dir(copyLog), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyLog, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log, "--audit", copyLog)
	if code != 0 || !strings.Contains(out, "from 10 allowed calls in 2 audit logs") || !strings.Contains(out, copyLog+" repeats 10 calls of "+log) {
		t.Fatalf("store recover with the log twice: exit %d\n%s%s", code, out, errs)
	}
	if u := f.usage()[f.key(1)]; u.Committed+u.Reserved != n*fleetCost {
		t.Errorf("the root's spend rebuilt as %d+%d from the same log given twice; %d calls were forwarded (%d)", u.Committed, u.Reserved, n, n*fleetCost)
	}
	p2, s2 := f.start(f.a, f.audited("p2", filepath.Join(f.e.Dir, "audit-2.log")), nil)
	more, typ, detail := drain(t, s2, 40)
	f.sameAsUpstreams([]*mcptest.Process{p, p2}, n+more)
	if n+more != 30 || typ != string(dct.BudgetExceeded) {
		t.Errorf("after the recovery: %d + %d forwarded on 30, then %s: %s; want 30, budget_exceeded", n, more, typ, detail)
	}
}
