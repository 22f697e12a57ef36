package proxy_test

import (
	"strings"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/proxy"
)

// TestApprovalPinChangedWhileHeld: a tool whose definition the upstream
// changes (and announces) while a call to it waits for approval is no
// longer the tool that was pinned: the approved call is refused as
// unpinned, never forwarded, as a call made after the change would be.
func TestApprovalPinChangedWhileHeld(t *testing.T) {
	t.Parallel()
	w := newPinWorld(t)
	for i := range w.policy.Rules {
		if w.policy.Rules[i].Match == "read_file" {
			w.policy.Rules[i].Approval = "required"
		}
	}
	mcptest.WriteFile(t, w.policyFile, w.policy.YAML())
	w.pin(t, 0, nil)
	p := w.proxy(t)
	c := p.Raw()
	c.Send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := c.Response(`"init"`); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	c.Send(mcptest.CallFrame("1", "read_file", notesPath))
	m := c.Next()
	if m.Method != proxy.MethodElicitationCreate {
		t.Fatalf("got %s %s %s, want the proxy's elicitation/create", m.Method, m.ID, m.Result)
	}
	ask := string(m.ID)
	// While the person looks at the form, the upstream redefines the tool
	// and says so.
	c.Send(mcptest.CallFrame("2", "redefine", map[string]any{"name": "read_file", "description": evil}))
	// The upstream (mcp-go over stdio) writes its notification and its
	// answer from different goroutines, in either order; the person
	// answers once the proxy has heard of the change, which the
	// notification it relays shows.
	for answered, announced := false, false; !answered || !announced; {
		switch m := c.Next(); {
		case m.Method == "notifications/tools/list_changed":
			announced = true
		case m.Method == "" && string(m.ID) == "2":
			if m.Error != nil {
				t.Fatalf("redefine: %+v", m.Error)
			}
			answered = true
		case m.Method == "":
			t.Fatalf("response with id %s, want 2", m.ID)
		}
	}
	c.Send(answer(ask, "accept", true))
	r := c.Response("1")
	if r.Error == nil || denialType(r) != string(gate.ToolNotPinned) || !strings.Contains(r.Error.Message, "tool read_file changed after it was approved") {
		t.Fatalf("the approved call to a tool redefined while it waited got %s %+v, want a %s denial", r.Result, r.Error, gate.ToolNotPinned)
	}
}
