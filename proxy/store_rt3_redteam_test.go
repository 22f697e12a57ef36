//go:build unix && redteam

package proxy_test

// Third red team of issue 19's store history (after wt-store3's fixes of
// R2-1, R2-2, R2-3, R2-5, R2-6, R2-7): attacks that still get calls
// forwarded past a budget, or wedge a fleet in store_reset with a remedy
// that cannot lift it. Each fails on the current code; run with:
//
//	go test -tags redteam -count=1 -run TestRedTeam3 ./proxy/

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/proxy"
)

// R3-2. A call held for approval reserves its cost first, which raises
// the root delegation's count of calls ("n"), and the proxy's kept count
// with it; a declined (or cancelled, or unanswered) approval releases the
// cost but not the count, and its decision in the audit log is a BLOCK,
// which store recover does not count (cmd/delegateos/storerecover.go:193
// counts allowed decisions only). So after a loss, store recover given
// every proxy's audit log rebuilds fewer calls than the proxy saw, and
// since R2-6's fix the proxy refuses the tree store_reset, saying to run
// store recover again with every proxy's log, this proxy's included:
// which was done, and doing it again changes nothing. The fleet stays
// refused until the operator, against the message's advice, accepts the
// loss with store init --reset --root.
func TestRedTeam3DeclinedApprovalWedgesRecovery(t *testing.T) {
	f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	logPath := filepath.Join(f.e.Dir, "audit-1.log")
	pol := f.policy("proxy_key: " + f.e.KeyFile(mcptest.NewKey(t, "p1")) + "\naudit_log: " + logPath + "\n")
	for i := range pol.Rules {
		if pol.Rules[i].Match == "echo" {
			pol.Rules[i].Approval = "required"
		}
	}
	a := &approver{answer: func(req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		if strings.Contains(req.Params.Message, "decline-me") {
			return answerWith(mcp.ElicitationResponseActionDecline, nil)
		}
		return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})
	}}
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s := p.Connect(mcptest.SessionOptions{Legacy: true, ClientOptions: []client.ClientOption{client.WithElicitationHandler(a)}})
	fwd, _, _ := rtDrain(t, s, 5)
	for range 3 {
		if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "decline-me"})); typ != string(proxy.ApprovalDeclined) {
			t.Fatalf("a declined call: %s: %s", typ, detail)
		}
	}
	m, _, _ := rtDrain(t, s, 2)
	fwd += m
	f.rtSettled()
	if u := f.usage()[f.key(1)]; u.Calls != fwd+3 {
		t.Fatalf("the root delegation counts %d calls, want the %d forwarded and the 3 declined", u.Calls, fwd)
	}
	// Its kept counts hold every call.
	want := fmt.Sprintf(":%d}", fwd+3)
	mcptest.Eventually(t, "the kept counts to hold "+want, func() bool {
		b, _ := os.ReadFile(f.seenFiles()[0])
		return strings.Contains(string(b), want)
	})
	if err := f.srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// The proxy finds the loss (and records in the store the identity it
	// saw), then the fleet is stopped for the recovery.
	if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(proxy.StoreReset) {
		t.Fatalf("after the flush: %s: %s, want store_reset", typ, detail)
	}
	rtStop(t, p)
	recoverAll := func() string {
		t.Helper()
		out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", logPath)
		if code != 0 {
			t.Fatalf("store recover with the fleet's only audit log: exit %d, %s%s", code, out, errs)
		}
		return out
	}
	out := recoverAll()
	// The same machine's proxy, started again after the recovery.
	pol.Extra = "proxy_key: " + f.e.KeyFile(mcptest.NewKey(t, "p2")) + "\naudit_log: " + filepath.Join(f.e.Dir, "audit-2.log") + "\n"
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s2 := p2.Connect(mcptest.SessionOptions{Legacy: true, ClientOptions: []client.ClientOption{client.WithElicitationHandler(a)}})
	typ, detail := denialData(s2.Call(t, "echo", map[string]any{"text": "after the recovery"}))
	if typ == "" {
		return // held
	}
	// The refusal says to run store recover again with every proxy's log:
	// the only log is given again, with the new proxy's too.
	recoverAgain, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", logPath, "--audit", filepath.Join(f.e.Dir, "audit-2.log"))
	typ2, detail2 := denialData(s2.Call(t, "echo", map[string]any{"text": "after the recovery, run again"}))
	first := func(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }
	// What does lift it: accepting the loss, which the message does not
	// advise after a recovery from every log.
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.srv.URL(), "--reset", "--root", f.e.Root.ID()); code != 0 {
		t.Logf("store init --reset --root: %d %s %s", code, out, errs)
	}
	typ3, detail3 := denialData(s2.Call(t, "echo", map[string]any{"text": "after init --reset --root"}))
	t.Logf("after store init --reset --root (accepting the loss): %q %s", typ3, detail3)
	t.Errorf("%d calls forwarded and 3 declined for approval; FLUSHALL; store recover with the fleet's only audit log (%s): the proxy refuses %s: %s.\nstore recover run again as told (exit %d, %s%s): %s: %s; want the calls forwarded after a recovery from every log", fwd, first(out), typ, detail, code, first(recoverAgain), errs, typ2, detail2)
}
