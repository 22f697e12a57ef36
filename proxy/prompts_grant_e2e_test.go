//go:build unix

package proxy_test

import (
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// prompts/get is decided by the prompt's name alone: its arguments are
// forwarded unmapped, and a prompt rule cannot take its resource from one
// (only a rule built in code can, and MapPrompt then refuses it). The
// docserver's summarize prompt reads the document named by its path
// argument, so a token that may read /project/sub/** and get summarize
// reads /project/secret.md through the prompt, which read_file and
// resources/read refuse it.
// Found by the second red team (was TestRedteam2PromptArgumentReadsOutsideTheGrant).
func TestE2EPromptArgumentWithinTheGrant(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	// A prompt grant by name alone covers every argument: the policy maps
	// summarize, which reads the document its path argument names, to
	// what reading that document needs, as it maps read_file.
	pol := e.Policy()
	pol.Extra = "prompts:\n  - {match: summarize, namespace: docs, action: read, resource: {arg: /path}}\n"
	tok := e.Mint(nil, "docs:read:/project/sub/**", "mcp-resource:read:file:///project/sub/**")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
	c := p.Raw()
	c.Initialize()
	// The grant holds for the tool and the resource.
	c.Send(mcptest.CallFrame("1", "read_file", map[string]any{"path": "/project/secret.md"}))
	if m := c.Response("1"); m.Error == nil {
		t.Fatalf("read_file /project/secret.md was allowed: %s", m.Result)
	}
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///project/secret.md"}}`)
	if m := c.Response("2"); m.Error == nil {
		t.Fatalf("resources/read file:///project/secret.md was allowed: %s", m.Result)
	}
	// The same document through the prompt.
	c.Send(`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"summarize","arguments":{"path":"/project/secret.md"}}}`)
	m := c.Response("3")
	if m.Error == nil && strings.Contains(string(m.Result), "STAGING_DB_PASSWORD") {
		t.Errorf("prompts/get summarize returned /project/secret.md, which the token may not read: %.200s", m.Result)
	}
	if denialType(m) != string(dct.CapabilityNotGranted) || !strings.Contains(m.Error.Message, "prompt summarize needs docs:read:/project/secret.md") {
		t.Errorf("prompts/get summarize of /project/secret.md was answered %+v; want capability_not_granted", m.Error)
	}
	// A granted document, and the prompt in the list.
	c.Send(`{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"summarize","arguments":{"path":"/project/sub/notes.md"}}}`)
	if m := c.Response("4"); m.Error != nil {
		t.Errorf("prompts/get summarize of a granted document: %+v", m.Error)
	}
	c.Send(`{"jsonrpc":"2.0","id":5,"method":"prompts/list"}`)
	if m := c.Response("5"); !strings.Contains(string(m.Result), `"summarize"`) {
		t.Errorf("prompts/list does not show summarize to a token that may use it: %s", m.Result)
	}
	// Without its argument, or as a completion (which names none), the
	// prompt maps to no document: refused.
	c.Send(`{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"summarize"}}`)
	if m := c.Response("6"); denialType(m) != string(dct.CapabilityNotGranted) {
		t.Errorf("prompts/get summarize without a path was answered %s %+v; want capability_not_granted", m.Result, m.Error)
	}
	c.Send(`{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"summarize"},"argument":{"name":"path","value":"/"}}}`)
	if m := c.Response("7"); denialType(m) != string(dct.CapabilityNotGranted) {
		t.Errorf("completing summarize's path was answered %s %+v; want capability_not_granted", m.Result, m.Error)
	}
}
