//go:build unix

package proxy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// approvalPolicy is reloadEnv's policy with echo asking for approval.
func (r *reloadEnv) approvalPolicy(echoNS string) string {
	pol := r.e.Policy(
		mcptest.Rule{Match: "echo", Namespace: echoNS, Action: "echo", Cost: 1, Approval: "required"},
		mcptest.Rule{Match: "elicit", Namespace: "mcp", Action: "elicit", Cost: 1},
	)
	pol.SpendStore, pol.RevocationList = r.spendPath, r.revPath
	pol.Extra = "proxy_key: " + r.keyFile + "\naudit_log: " + r.auditPath + "\n"
	return pol.YAML()
}

// A call held for approval, then a reload that takes the tool away (an
// operator narrowing the policy in an incident), then the person
// approves: the call does not run, since the policy in force no longer
// grants it, and nothing is charged. Found by the red team: the approved
// call was forwarded, its token alone checked again.
func TestE2EReloadNarrowedWhileHeldForApproval(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 1000, nil)
	r.firstHash = r.write(t, r.approvalPolicy("mcp"))
	r.hangup(t, true)
	r.c.Send(mcptest.CallFrame(`"held"`, "echo", map[string]any{"text": "held"}))
	ask := r.c.Next()
	if ask.Method != "elicitation/create" {
		t.Fatalf("got %s %s, want the proxy's approval request", ask.Method, ask.ID)
	}
	r.write(t, r.approvalPolicy("admin"))
	r.hangup(t, true)
	r.c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"approve":true}}}`, ask.ID))
	m := r.c.Response(`"held"`)
	if m.Error == nil {
		t.Fatalf("a call held for approval ran after a reload that no longer grants it: %s", m.Result)
	}
	if !strings.Contains(string(m.Error.Data), "capability_not_granted") || !strings.Contains(m.Error.Message+string(m.Error.Data), "approved, but while it waited") {
		t.Errorf("refused with %s %s; want capability_not_granted, approved but while it waited", m.Error.Message, m.Error.Data)
	}
	if r.call(t, "after", "capability_not_granted") {
		t.Fatal("echo allowed after the narrowing reload")
	}
	stopProxy(t, r.p)
	if spent := r.spent(t); spent != 0 {
		t.Errorf("spent %d; want 0 (nothing ran)", spent)
	}
}
