//go:build unix

package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/dct"
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

// A call held for approval is still forwarded when approved after a
// reload that does not touch what it needs (another tool's cost), even
// with other frames read meanwhile: it is decided again by the policy in
// force on the arguments it was held with (a copy: the reader's buffer
// they were read into has been overwritten by then).
func TestE2EReloadUnrelatedWhileHeldForApproval(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	path := filepath.Join(e.Dir, "approval-policy.yaml")
	write := func(readCost int64) {
		pol := e.Policy()
		for i := range pol.Rules {
			switch pol.Rules[i].Match {
			case "write_file":
				pol.Rules[i].Cost, pol.Rules[i].Approval = 1, "required"
			case "read_file":
				pol.Rules[i].Cost = readCost
			}
		}
		mcptest.WriteFile(t, path, pol.YAML())
	}
	write(1)
	tok := e.Mint(mcptest.Budget(1000), "docs:read:/project/**", "docs:write:/project/**")
	p := e.StartProxy(mcptest.ProxyOptions{Token: tok, Flags: []string{"--policy", path}})
	c := p.Raw()
	c.Send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := c.Response(`"init"`); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.Send(mcptest.CallFrame(`"held"`, "write_file", map[string]any{"path": "/project/held.md", "content": "approved text"}))
	ask := c.Next()
	if ask.Method != "elicitation/create" {
		t.Fatalf("got %s %s, want the proxy's approval request", ask.Method, ask.ID)
	}
	// Frames that overwrite the reader's buffer where the held call's
	// arguments were.
	for i := range 4 {
		id := fmt.Sprintf(`"r%d"`, i)
		c.Send(mcptest.CallFrame(id, "read_file", map[string]any{"path": "/etc/passwd", "pad": strings.Repeat("x", 1000*(i+1))}))
		c.Response(id)
	}
	write(2)
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.WaitLog(logReloaded, nil)
	c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"approve":true}}}`, ask.ID))
	if m := c.Response(`"held"`); m.Error != nil {
		t.Fatalf("a held call approved after an unrelated reload was refused: %s %s", m.Error.Message, m.Error.Data)
	}
	if _, err := os.Stat(filepath.Join(e.Docs, "project", "held.md")); err != nil {
		t.Fatalf("the approved write did not happen: %v", err)
	}
	stopProxy(t, p)
}

// Tried: the 2026-07-28 approval (an input_required result, the request
// sent back with the answer), a reload that takes write_file away between
// the two. Held: the request sent back is a new request, decided by the
// policy in force, and refused; nothing is written.
func TestE2EReloadNarrowedBetweenModernApprovalAndRetry(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	path := filepath.Join(e.Dir, "approval-policy.yaml")
	write := func(ns string) {
		pol := e.Policy()
		for i := range pol.Rules {
			if pol.Rules[i].Match == "write_file" {
				pol.Rules[i].Namespace, pol.Rules[i].Cost, pol.Rules[i].Approval = ns, 1, "required"
			}
		}
		mcptest.WriteFile(t, path, pol.YAML())
	}
	write("docs")
	tok := e.Mint(mcptest.Budget(1000), "docs:read:/project/**", "docs:write:/project/**")
	p := e.StartProxy(mcptest.ProxyOptions{Token: tok, Flags: []string{"--policy", path}})
	c := p.Raw()
	c.Initialize()
	c.Send(modernCall("1", "/project/m.md", ""))
	state := inputRequired(t, c.Response("1"))
	write("admin")
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.WaitLog(logReloaded, nil)
	c.Send(modernCall("2", "/project/m.md", withAnswer(state, "accept", true)))
	wantDenialFrame(t, c.Response("2"), dct.CapabilityNotGranted, "")
	if _, err := os.Stat(filepath.Join(e.Docs, "project", "m.md")); err == nil {
		t.Fatal("the call approved before the narrowing reload was written")
	}
	stopProxy(t, p)
}
