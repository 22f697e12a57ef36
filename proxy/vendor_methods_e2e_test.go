//go:build unix

package proxy_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

const vendorMethods = "methods:\n  - {method: acme/search, namespace: acme, action: search, cost: 7}\n" +
	"  - {method: x-acme/bulk_Get2, namespace: acme, action: bulk}\n"

// vendorUpstream answers acme/search and acme/other with a result.
func vendorUpstream(t *testing.T, e *mcptest.Env) []string {
	return scriptedUpstream(t, e, map[string]string{
		"acme/search":      `{"jsonrpc":"2.0","id":$ID,"result":{"hits":["found"]}}`,
		"acme/other":       `{"jsonrpc":"2.0","id":$ID,"result":{"other":true}}`,
		"x-acme/bulk_Get2": `{"jsonrpc":"2.0","id":$ID,"result":{"bulk":true}}`,
	})
}

// Servers with vendor extension methods had no way through the gate:
// every method MCP does not define was refused -32601. Now the policy's
// methods list names them, each with the capability that gates it: a
// token granting it gets through, one that does not is refused as for a
// tool, and a method the list does not name is still -32601.
func TestE2EVendorMethods(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	pol := e.Policy()
	pol.Extra = vendorMethods
	search := `{"jsonrpc":"2.0","id":1,"method":"acme/search","params":{"q":"x"}}`
	other := `{"jsonrpc":"2.0","id":2,"method":"acme/other","params":{}}`
	for _, c := range []struct {
		name, caps, wantSearch string
	}{
		{"granted", "acme:search:acme/search", "result"},
		{"granted any", "acme:search:*", "result"},
		{"not granted", "mcp:echo:*", "capability_not_granted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: e.Mint(nil, c.caps), Upstream: vendorUpstream(t, e)})
			r := p.Raw()
			r.Initialize()
			r.Send(search)
			m := r.Response("1")
			switch c.wantSearch {
			case "result":
				if m.Error != nil || !strings.Contains(string(m.Result), "found") {
					t.Fatalf("acme/search with %s: %s %+v; want the upstream's result", c.caps, m.Result, m.Error)
				}
			default:
				if m.Error == nil || m.Error.Code != -32001 || denialType(m) != c.wantSearch {
					t.Fatalf("acme/search with %s: %s %+v; want a %s denial", c.caps, m.Result, m.Error, c.wantSearch)
				}
			}
			r.Send(other)
			if m := r.Response("2"); m.Error == nil || m.Error.Code != -32601 {
				t.Fatalf("acme/other, which the policy does not list: %s %+v; want -32601", m.Result, m.Error)
			}
		})
	}
	// The cost of the rule is charged: the decision line says so; each
	// decision leaves its receipts, naming the method.
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "vendor-audit.log")
	withLog := *pol
	withLog.Extra += "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	p := e.StartProxy(mcptest.ProxyOptions{Policy: &withLog, Token: e.Mint(nil, "acme:search:*"), Upstream: vendorUpstream(t, e)})
	r := p.Raw()
	r.Initialize()
	r.Send(search)
	r.Response("1")
	line := p.WaitLog("decision", func(m map[string]any) bool { return m["allowed"] == true })
	if line["cost"] != 7.0 {
		t.Errorf("acme/search was logged %v; want cost 7", line)
	}
	r.Send(`{"jsonrpc":"2.0","id":3,"method":"x-acme/bulk_Get2"}`)
	if m := r.Response("3"); denialType(m) != "capability_not_granted" {
		t.Errorf("x-acme/bulk_Get2 with acme:search:* answered %s %+v; want capability_not_granted", m.Result, m.Error)
	}
	ds, xs := receiptsOf(t, p, logPath)
	if len(ds) != 2 || len(xs) != 1 || ds[0].Action != "mcp.acme.search" || ds[0].Resource != "acme/search" || ds[0].Capability == nil ||
		ds[0].Capability.Namespace != "acme" || ds[1].Action != "mcp.x-acme.bulk_Get2" || ds[1].Decision != "BLOCK" {
		t.Errorf("receipts of vendor methods: %+v %+v", ds, xs)
	}

	// policy check shows the list.
	path := filepath.Join(e.Dir, "vendor-policy.yaml")
	mcptest.WriteFile(t, path, pol.YAML())
	out, stderr, code := mcptest.CLI(t, "policy", "check", path)
	if code != 0 || !strings.Contains(out, "methods:") || !strings.Contains(out, "acme/search") || !strings.Contains(out, "acme:search:acme/search, cost 7") {
		t.Fatalf("policy check: %d %s %s", code, out, stderr)
	}
	out, _, code = mcptest.CLI(t, "policy", "check", "--json", path)
	var js struct {
		Methods []struct{ Method, Namespace, Action, Resource string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &js) != nil || len(js.Methods) != 2 || js.Methods[0].Resource != "acme/search" {
		t.Fatalf("policy check --json: %d %s", code, out)
	}
	// A method MCP defines cannot be listed.
	bad := filepath.Join(e.Dir, "bad-policy.yaml")
	mcptest.WriteFile(t, bad, "methods:\n  - {method: tools/call, namespace: acme, action: x}\n")
	if out, stderr, code := mcptest.CLI(t, "policy", "check", bad); code == 0 || !strings.Contains(out+stderr, "MCP method") {
		t.Fatalf("a methods rule naming tools/call: %d %s %s; want it refused", code, out, stderr)
	}
}

// The same through delegateos serve.
func TestE2EVendorMethodsServe(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	pol := e.Policy()
	pol.Extra = vendorMethods
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Upstream: vendorUpstream(t, e)})
	for _, c := range []struct {
		caps, method, want string
	}{
		{"acme:search:*", "acme/search", "found"},
		{"mcp:echo:*", "acme/search", "-32001"},
		{"acme:search:*", "acme/other", "-32601"},
	} {
		tok := e.Mint(nil, c.caps)
		sid := srv.Initialize(mcptest.Bearer(tok))
		res := srv.Post(sid, mcptest.Bearer(tok), `{"jsonrpc":"2.0","id":1,"method":"`+c.method+`","params":{}}`)
		if !strings.Contains(string(res.Body), c.want) {
			t.Errorf("%s with %s through serve: HTTP %d %s; want %s", c.method, c.caps, res.Status, res.Body, c.want)
		}
	}
}

// Vendor method names: only the exact listed name is gated through; names
// that differ (escapes decode to the same name, so they are the same
// method) must not reach the upstream ungated; notifications are dropped.
// Found by the red team of receipts and frames (issue 26 item 2) (was TestRTVendorMethodVariants).
func TestE2EVendorMethodVariantsGated(t *testing.T) {
	e := mcptest.NewEnv(t)
	pol := e.Policy()
	pol.Extra = vendorMethods
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: e.Mint(nil, "mcp:echo:*"), Upstream: lineEchoUpstream(t, e, nil)})
	c := p.Raw()
	c.Initialize()
	for i, m := range []string{`acme\/search`, `acme/\u0073earch`, `ACME/search`, `acme/search/`, `acme//search`, `/acme/search`, `acme/search\u0000`, `acme/sеarch`, `acme/search `} {
		id := fmt.Sprint(i + 10)
		c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + m + `","params":{}}`)
		r := c.Response(id)
		if r.Error == nil {
			t.Errorf("method %s without the capability reached the upstream: %s", m, r.Result)
		}
	}
	// As a notification, then a request that lets us see what the upstream got next.
	c.Send(`{"jsonrpc":"2.0","method":"acme/search","params":{}}`)
	c.Send(`{"jsonrpc":"2.0","method":"x-acme/bulk_Get2"}`)
	c.Send(mcptest.CallFrame("99", "echo", map[string]any{"t": "a"}))
	r := c.Response("99")
	if r.Error != nil {
		t.Fatalf("echo: %+v", r.Error)
	}
	if got := receivedLine(t, r); strings.Contains(got, "acme") {
		t.Errorf("a vendor method sent as a notification reached the upstream ungated: %s", got)
	}
}
