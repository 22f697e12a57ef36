//go:build unix

package proxy_test

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

// R3-2 (third red team of issue 19). A call held for approval reserves
// its cost before it is held, which raises the root delegation's count of
// calls and the proxy's kept count with it; a declined approval releases
// the cost, not the count, and its decision in the audit log is a BLOCK.
// store recover counted allowed decisions only, so a recovery given every
// proxy's log rebuilt fewer calls than the proxy saw and was refused for
// ever ("run it again with every proxy's log"). It now counts a held
// call's refusal (and a waiting answer) as the counted, uncharged call it
// was: the recovery lifts the tree, the spend is exactly the forwarded
// calls', and the budget still binds.
func TestE2EFaultDeclinedApprovalsCountedByRecovery(t *testing.T) {
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
	want := fmt.Sprintf(":%d}", fwd+3)
	mcptest.Eventually(t, "the kept counts to hold "+want, func() bool {
		b, _ := os.ReadFile(f.seenFiles()[0])
		return strings.Contains(string(b), want)
	})
	if err := f.srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(proxy.StoreReset) {
		t.Fatalf("after the flush: %s: %s, want store_reset", typ, detail)
	}
	rtStop(t, p)
	if out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", logPath); code != 0 {
		t.Fatalf("store recover with the fleet's only audit log: exit %d, %s%s", code, out, errs)
	}
	if u := f.usage()[f.key(1)]; u.Calls != fwd+3 || u.Committed != fwd*fleetCost {
		t.Fatalf("rebuilt: %d calls, %d committed; want %d calls (the declined counted) and %d committed (only the forwarded)", u.Calls, u.Committed, fwd+3, fwd*fleetCost)
	}
	// The same machine's proxy, started again after the recovery, forwards,
	// and the budget binds at exactly 30 forwarded calls.
	pol.Extra = "proxy_key: " + f.e.KeyFile(mcptest.NewKey(t, "p2")) + "\naudit_log: " + filepath.Join(f.e.Dir, "audit-2.log") + "\n"
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a})
	s2 := p2.Connect(mcptest.SessionOptions{Legacy: true, ClientOptions: []client.ClientOption{client.WithElicitationHandler(a)}})
	more, typ, detail := rtDrain(t, s2, 40)
	if fwd+more != 30 || typ != "budget_exceeded" {
		t.Fatalf("after the recovery: %d more forwarded (%d in all), then %s: %s; want 30 in all, then budget_exceeded", more, fwd+more, typ, detail)
	}
}
