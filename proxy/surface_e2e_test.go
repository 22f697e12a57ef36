//go:build unix

package proxy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// recordUpstream wraps the docserver in a shell that copies every byte
// the upstream receives to a file, which it returns.
func recordUpstream(t *testing.T, e *mcptest.Env) (wrap []string, record string) {
	t.Helper()
	record = filepath.Join(e.Dir, "upstream-input.jsonl")
	return []string{"sh", "-c", `tee -a "$0" | "$@"`, record}, record
}

// upstreamInput is what the upstream has received so far, a line a frame.
func upstreamInput(t *testing.T, record string) []string {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// recordedThrough waits until the record holds n frames containing
// marker (the last frames a test sent), since tee writes to the upstream
// before the file, and returns every recorded frame.
func recordedThrough(t *testing.T, record, marker string, n int) []string {
	t.Helper()
	count := func() int {
		c := 0
		for _, l := range upstreamInput(t, record) {
			if strings.Contains(l, marker) {
				c++
			}
		}
		return c
	}
	mcptest.Eventually(t, "the recorded frames", func() bool { return count() >= n })
	return upstreamInput(t, record)
}

// denialType reads a raw error's data.type.
func denialType(m mcptest.RawMessage) string {
	if m.Error == nil {
		return ""
	}
	var d struct{ Type string }
	_ = json.Unmarshal(m.Error.Data, &d)
	return d.Type
}

// A tool name is decided as the string it decodes to, however it is
// spelt: after a call whose name holds a literal backslash sequence, the
// same bytes read as escapes must not be taken for it.
func TestE2EEscapedToolName(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	// Every tool without a rule is granted (mcp:*:*); write_file has a
	// rule and needs docs:write, which the token does not grant.
	tok := e.Mint(nil, "mcp:*:*", "docs:read:/project/**")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok})
	c := p.Raw()
	c.Initialize()
	args := `{"path":"/project/planted.md","content":"pwned"}`
	frames := []string{
		// The name is the nine characters write\u005ffile, a tool that
		// does not exist: mapped to mcp:<name>:*, allowed, and the
		// upstream answers that it has no such tool.
		`"write\\u005ffile"`,
		// These are all write_file.
		`"write\u005ffile"`,
		`"\u0077rite_file"`,
		`"\u0077\u0072\u0069\u0074\u0065\u005f\u0066\u0069\u006c\u0065"`,
		`"write_file"`,
		`"write\u005ffile"`,
	}
	for i, name := range frames {
		id := fmt.Sprint(i + 1)
		c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":` + name + `,"arguments":` + args + `}}`)
		m := c.Response(id)
		if i == 0 {
			if denialType(m) != "" {
				t.Errorf("call %s was denied: %+v", name, m.Error)
			}
			continue
		}
		if got := denialType(m); got != string(dct.CapabilityNotGranted) || !strings.Contains(m.Error.Message, "tool write_file needs docs:write:/project/planted.md") {
			t.Errorf("call %s was answered %+v; want a capability_not_granted denial for write_file", name, m.Error)
		}
	}
	if _, err := os.Stat(filepath.Join(e.Docs, "project", "planted.md")); !os.IsNotExist(err) {
		t.Errorf("write_file ran: the planted file exists (%v)", err)
	}
	if n := len(p.LogWith("upstream stderr", mcptest.UpstreamLogged("tool=write_file"))); n != 0 {
		t.Errorf("the upstream ran write_file %d times", n)
	}
}

// A session survives any number of cancelled calls against an upstream
// that does not answer them (as the specification asks): each frees its
// slot at once, and is charged what it reserved.
func TestE2ECancelledCallsFreeTheirSlots(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(mcptest.Budget(1_000_000_000), "mcp:slow:*", "mcp:echo:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("slow", 3)), Token: tok, Upstream: silentUpstream()})
	c := p.Raw()
	c.Initialize()
	const n = 4200 // more than the 4,096 requests a session may have in flight
	for i := range n {
		id := fmt.Sprint(1000 + i)
		c.Send(mcptest.CallFrame(id, "slow", map[string]any{}))
		c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"test"}}`)
	}
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if m := c.Response("1"); m.Error != nil {
		t.Fatalf("ping after %d cancelled calls: %+v", n, m.Error)
	}
	// One more call is forwarded, not refused for too many in flight.
	c.Send(mcptest.CallFrame("2", "echo", map[string]any{}))
	c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	p.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "echo" && m["outcome"] == "cancelled" })
	isSlow := func(m map[string]any) bool { return m["tool"] == "slow" && m["outcome"] == "cancelled" }
	mcptest.Eventually(t, "a line for every cancelled call", func() bool {
		return len(p.LogWith("decision", isSlow)) == n
	})
	for _, m := range p.LogWith("decision", isSlow) {
		if m["cost"] != 3.0 {
			t.Fatalf("a cancelled call was charged %v, want its reservation of 3: %v", m["cost"], m)
		}
	}
}

// notifications/cancelled params are read as strictly as a call's: a
// re-cased or repeated requestId cancels nothing (and does not reach the
// upstream), so the call runs and is charged as usual.
func TestE2ECancellationReadStrictly(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	wrap, record := recordUpstream(t, e)
	tok := e.Mint(mcptest.Budget(1000), "mcp:slow:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("slow", 100)), Token: tok, Wrap: wrap})
	c := p.Raw()
	c.Initialize()
	for _, cancel := range []string{
		`{"RequestId":5}`,
		`{"requestId":99,"requestid":5}`,
		`{"requestId":5,"requestId":5}`,
		`{"requestId":5,"_meta":{"a":1,"A":2}}`,
	} {
		c.Send(mcptest.CallFrame("5", "slow", map[string]any{"steps": 1, "delay_ms": 50}))
		c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":` + cancel + `}`)
		if got := mcptest.ResultText(t, c.Response("5")); !strings.Contains(got, "1") {
			t.Errorf("slow after the cancellation %s = %q", cancel, got)
		}
	}
	isSlow := func(m map[string]any) bool { return m["tool"] == "slow" }
	mcptest.Eventually(t, "4 decision lines", func() bool { return len(p.LogWith("decision", isSlow)) == 4 })
	lines := p.LogWith("decision", isSlow)
	for _, m := range lines {
		if m["outcome"] != "result" || m["cost"] != 100.0 {
			t.Errorf("a call the client could not cancel ended %v, charged %v; want result, 100", m["outcome"], m["cost"])
		}
	}
	for _, line := range recordedThrough(t, record, `"method":"tools/call"`, 4) {
		if strings.Contains(line, "notifications/cancelled") {
			t.Errorf("the upstream received an ambiguous cancellation: %s", line)
		}
	}
}

// A method the gate does not know is refused, not forwarded.
func TestE2EUnknownMethodRefused(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	wrap, record := recordUpstream(t, e)
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:*:*"), Wrap: wrap})
	c := p.Raw()
	c.Initialize()
	for _, method := range []string{"admin/shutdown", "tools/Call", "resources/READ", "x"} {
		c.Send(`{"jsonrpc":"2.0","id":1,"method":` + mcptest.MustJSON(method) + `,"params":{}}`)
		if m := c.Response("1"); m.Error == nil || m.Error.Code != -32601 {
			t.Errorf("%s was answered %+v; want -32601", method, m.Error)
		}
	}
	// Nor is a notification no MCP client sends.
	c.Send(`{"jsonrpc":"2.0","method":"admin/reload","params":{}}`)
	c.Send(`{"jsonrpc":"2.0","method":"notifications/custom"}`)
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	c.Response("2")
	for _, line := range recordedThrough(t, record, `"method":"ping"`, 1) {
		for _, method := range []string{"admin/shutdown", "tools/Call", "resources/READ", `"x"`, "admin/reload", "notifications/custom"} {
			if strings.Contains(line, method) {
				t.Errorf("the upstream received %s: %s", method, line)
			}
		}
	}
}

// _delegateos is removed from every client message before it is
// forwarded, and carries the token on every gated request.
func TestE2EDelegateosStrippedEverywhere(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	wrap, record := recordUpstream(t, e)
	tok := e.Mint(nil, "mcp:echo:*", "mcp-resource:read:file:///project/**", "mcp-prompt:get:*")
	// No session Token: only the tokens in _delegateos authorize.
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Wrap: wrap})
	c := p.Raw()
	dos := `"_delegateos":{"dct":` + mcptest.MustJSON(tok.String()) + `}`
	c.Send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{` + dos + `,"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m := c.Response(`"init"`); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{` + dos + `}}`)
	requests := []string{
		`"method":"ping","params":{` + dos + `}`,
		`"method":"tools/list","params":{"_DelegateOS":{"x":1}}`,
		`"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"},` + dos + `}`,
		`"method":"resources/list","params":{` + dos + `}`,
		`"method":"resources/templates/list","params":{` + dos + `,"cursor":null}`,
		`"method":"resources/read","params":{` + dos + `,"uri":"file:///project/README.md"}`,
		`"method":"prompts/list","params":{` + dos + `}`,
		`"method":"prompts/get","params":{"name":"greeting",` + dos + `}`,
		`"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"summarize"},"argument":{"name":"path","value":"/pro"},` + dos + `}`,
	}
	for i, r := range requests {
		id := fmt.Sprint(i + 1)
		c.Send(`{"jsonrpc":"2.0","id":` + id + `,` + r + `}`)
		if m := c.Response(id); m.Error != nil {
			t.Errorf("%s: %+v", r, m.Error)
		}
	}
	c.Send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	c.Response("99")
	// tee writes to the upstream before the file: wait for the file.
	mcptest.Eventually(t, "the recorded frames", func() bool { return len(upstreamInput(t, record)) >= len(requests)+3 })
	lines := upstreamInput(t, record)
	if len(lines) < len(requests)+3 {
		t.Fatalf("the upstream received %d frames, want at least %d", len(lines), len(requests)+3)
	}
	for _, line := range lines {
		if strings.Contains(strings.ToLower(line), "_delegateos") {
			t.Errorf("the upstream received _delegateos: %s", line)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("the upstream received a frame that is not JSON: %s", line)
		}
	}
}

// Resources, prompts and completions are gated like tools, and their
// lists show what the token may use.
func TestE2EResourcesAndPromptsGated(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	wrap, record := recordUpstream(t, e)
	tok := e.Mint(nil, "mcp-resource:read:file:///project/sub/**", "mcp-prompt:get:greeting")

	t.Run("without a token", func(t *testing.T) {
		p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Wrap: wrap})
		c := p.Raw()
		c.Initialize()
		for i, r := range []string{
			`"method":"resources/read","params":{"uri":"file:///project/README.md"}`,
			`"method":"resources/subscribe","params":{"uri":"file:///project/README.md"}`,
			`"method":"prompts/get","params":{"name":"greeting"}`,
			`"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"summarize"},"argument":{"name":"path","value":"/"}}`,
			`"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///{+path}"},"argument":{"name":"path","value":"/"}}`,
		} {
			id := fmt.Sprint(i + 1)
			c.Send(`{"jsonrpc":"2.0","id":` + id + `,` + r + `}`)
			if m := c.Response(id); denialType(m) != string(dct.Malformed) || !strings.Contains(m.Error.Message, "no DCT") {
				t.Errorf("%s without a token was answered %+v; want a denial", r, m.Error)
			}
		}
		for i, list := range []string{"resources/list", "resources/templates/list", "prompts/list"} {
			id := fmt.Sprint(10 + i)
			c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + list + `"}`)
			m := c.Response(id)
			if m.Error != nil {
				t.Fatalf("%s: %+v", list, m.Error)
			}
			var r map[string][]json.RawMessage
			_ = json.Unmarshal(m.Result, &r)
			for k, v := range r {
				if len(v) != 0 {
					t.Errorf("%s without a token shows %s %s", list, k, v)
				}
			}
		}
		for _, line := range recordedThrough(t, record, `"method":"prompts/list"`, 1) {
			for _, m := range []string{"resources/read", "resources/subscribe", "prompts/get", "completion/complete"} {
				if strings.Contains(line, m) {
					t.Errorf("a denied %s reached the upstream: %s", m, line)
				}
			}
		}
	})

	t.Run("with a token", func(t *testing.T) {
		p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok})
		c := p.Raw()
		c.Initialize()
		c.Send(`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`)
		var resources struct {
			Resources []struct{ URI string }
		}
		if err := json.Unmarshal(c.Response("1").Result, &resources); err != nil {
			t.Fatal(err)
		}
		if len(resources.Resources) != 2 || resources.Resources[0].URI != "file:///project/sub/notes.md" || resources.Resources[1].URI != "file:///project/sub/plan.md" {
			t.Errorf("resources/list shows %+v; want only the two documents under /project/sub", resources.Resources)
		}
		c.Send(`{"jsonrpc":"2.0","id":2,"method":"prompts/list"}`)
		var prompts struct {
			Prompts []struct{ Name string }
		}
		if err := json.Unmarshal(c.Response("2").Result, &prompts); err != nil {
			t.Fatal(err)
		}
		if len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "greeting" {
			t.Errorf("prompts/list shows %+v; want only greeting", prompts.Prompts)
		}
		c.Send(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///project/sub/notes.md"}}`)
		if m := c.Response("3"); m.Error != nil || !strings.Contains(string(m.Result), "Weekly sync notes") {
			t.Errorf("reading a granted resource: %s %+v", m.Result, m.Error)
		}
		c.Send(`{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"greeting"}}`)
		if m := c.Response("4"); m.Error != nil {
			t.Errorf("getting a granted prompt: %+v", m.Error)
		}
		denied := []struct{ req, message string }{
			{`"method":"resources/read","params":{"uri":"file:///project/secret.md"}`, "resource file:///project/secret.md needs mcp-resource:read:file:///project/secret.md"},
			{`"method":"resources/read","params":{"uri":"file:///project/sub/../secret.md"}`, "segment"},
			{`"method":"resources/read","params":{"uri":"file:///project/sub/%2e%2e/secret.md"}`, "percent-encoded"},
			{`"method":"resources/read","params":{"uri":"file:///project/%73ecret.md"}`, "percent-encoded"},
			{`"method":"resources/subscribe","params":{"uri":"file:///project/secret.md"}`, "resource file:///project/secret.md needs"},
			{`"method":"prompts/get","params":{"name":"summarize","arguments":{"path":"/project/secret.md"}}`, "prompt summarize needs mcp-prompt:get:summarize"},
			{`"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"summarize"},"argument":{"name":"path","value":"/"}}`, "prompt summarize needs"},
			{`"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///{+path}"},"argument":{"name":"path","value":"/"}}`, "resource file:///{+path} needs"},
		}
		for i, d := range denied {
			id := fmt.Sprint(10 + i)
			c.Send(`{"jsonrpc":"2.0","id":` + id + `,` + d.req + `}`)
			m := c.Response(id)
			if denialType(m) != string(dct.CapabilityNotGranted) || !strings.Contains(m.Error.Message, d.message) {
				t.Errorf("%s was answered %+v; want a capability_not_granted denial saying %q", d.req, m.Error, d.message)
			}
		}
		// Malformed gated requests are refused before the gate.
		for i, r := range []string{
			`"method":"resources/read","params":{"uri":"file:///project/sub/notes.md","URI":"file:///project/secret.md"}`,
			`"method":"resources/read","params":{"URI":"file:///project/secret.md"}`,
			`"method":"resources/read"`,
			`"method":"prompts/get","params":{"name":"greeting","Name":"summarize"}`,
			`"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"greeting","Name":"summarize"}}`,
		} {
			id := fmt.Sprint(30 + i)
			c.Send(`{"jsonrpc":"2.0","id":` + id + `,` + r + `}`)
			if m := c.Response(id); m.Error == nil || m.Error.Code != -32600 {
				t.Errorf("%s was answered %+v; want -32600", r, m.Error)
			}
		}
		isRead := func(m map[string]any) bool { return m["method"] == "resources/read" }
		mcptest.Eventually(t, "5 decision lines for resources/read", func() bool { return len(p.LogWith("decision", isRead)) == 5 })
		for _, m := range p.LogWith("decision", isRead) {
			if m["target"] == "file:///project/sub/notes.md" && (m["allowed"] != true || m["outcome"] != "result") {
				t.Errorf("the granted read's line: %v", m)
			}
		}
	})
}

// Pipelined calls whose upstream reports more than they reserved never
// take spend past the budget: a reported cost is capped at the
// reservation.
func TestE2EReportedCostCannotOverspend(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	pol := e.Policy(mcptest.Priced("costly", 100))
	pol.HonourUpstreamCost = true
	tok := e.Mint(mcptest.Budget(1000), "mcp:costly:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
	c := p.Raw()
	c.Initialize()
	const n = 30
	var burst strings.Builder
	for i := range n {
		burst.WriteString(mcptest.CallFrame(fmt.Sprint(i+1), "costly", map[string]any{"cost": 950}) + "\n")
	}
	c.Send(strings.TrimSuffix(burst.String(), "\n"))
	allowed := 0
	for range n {
		m := c.Next()
		if m.Method != "" {
			continue
		}
		switch {
		case m.Error == nil:
			allowed++
		case denialType(m) != string(dct.BudgetExceeded):
			t.Errorf("a call was answered %+v; want a result or budget_exceeded", m.Error)
		}
	}
	if allowed != 10 {
		t.Errorf("%d of %d calls reserving 100 of a budget of 1000 were allowed; want 10", allowed, n)
	}
	isCostly := func(m map[string]any) bool { return m["tool"] == "costly" && m["allowed"] == true }
	mcptest.Eventually(t, "a line for every allowed call", func() bool { return len(p.LogWith("decision", isCostly)) == allowed })
	var spent float64
	for _, m := range p.LogWith("decision", isCostly) {
		spent += m["cost"].(float64)
	}
	if spent > 1000 {
		t.Errorf("the calls were charged %v in all, over the budget of 1000", spent)
	}
}

// With honour_upstream_cost a rule's max_cost is reserved: the upstream's
// report is charged up to it, and a call the client cancels is charged
// all of it (the upstream may have done the work it would have reported).
func TestE2EMaxCost(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	pol := e.Policy(
		mcptest.Rule{Match: "costly", Namespace: "mcp", Action: "costly", Cost: 100, MaxCost: 1000},
		mcptest.Rule{Match: "slow", Namespace: "mcp", Action: "slow", Cost: 10, MaxCost: 500},
	)
	pol.HonourUpstreamCost = true
	tok := e.Mint(mcptest.Budget(3000), "mcp:costly:*", "mcp:slow:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
	c := p.Raw()
	c.Initialize()

	c.Send(mcptest.CallFrame("1", "costly", map[string]any{"cost": 950}))
	mcptest.ResultText(t, c.Response("1"))
	c.Send(mcptest.CallFrame("2", "costly", map[string]any{"cost": 5000}))
	mcptest.ResultText(t, c.Response("2"))
	c.Send(mcptest.CallFrame("3", "slow", map[string]any{"steps": 1, "delay_ms": 5000}))
	c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
	// 950 + 1000 + 500 spent: a call reserving 1000 no longer fits 3000.
	c.Send(mcptest.CallFrame("4", "costly", map[string]any{"cost": 0}))
	if m := c.Response("4"); denialType(m) != string(dct.BudgetExceeded) || !strings.Contains(m.Error.Message, "spent 2450 of 3000") {
		t.Errorf("a fourth call was answered %+v; want budget_exceeded after 2450 of 3000", m.Error)
	}
	want := map[string]float64{"costly/result": 950 + 1000, "slow/cancelled": 500}
	got := map[string]float64{}
	mcptest.Eventually(t, "three settled lines", func() bool {
		return len(p.LogWith("decision", func(m map[string]any) bool { return m["allowed"] == true })) == 3
	})
	for _, m := range p.LogWith("decision", func(m map[string]any) bool { return m["allowed"] == true }) {
		got[m["tool"].(string)+"/"+m["outcome"].(string)] += m["cost"].(float64)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s charged %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

// policy check --upstream compares the prompt rules with the prompts the
// upstream lists, as it does the tool rules with its tools.
func TestPolicyCheckUpstreamPrompts(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	path := filepath.Join(e.Dir, "policy.yaml")
	mcptest.WriteFile(t, path, "roots: ["+e.Root.ID()+"]\nprompts:\n  - {match: summarize, namespace: docs, action: read, resource: {arg: /path}}\n  - {match: no-such-prompt, namespace: x, action: y}\n")
	out, errOut, code := mcptest.CLI(t, "policy", "check", path, "--upstream", "--", mcptest.Docserver(t), "--root", e.Docs)
	if code != 0 {
		t.Fatalf("policy check: exit %d\n%s\n%s", code, out, errOut)
	}
	all := out + errOut
	for _, want := range []string{"upstream prompts:", "2 listed", "no-such-prompt", "greeting", "mcp-prompt:get:greeting"} {
		if !strings.Contains(all, want) {
			t.Errorf("policy check --upstream does not say %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "mcp-prompt:get:summarize") {
		t.Errorf("summarize has a rule, but is listed as unmatched:\n%s", all)
	}
}

// A client that closes its input with a call in flight cannot make the
// call free: an upstream that then answers it with an error (the end of
// its input cancelled the work) is charged the reservation, as a
// cancellation is; the answer still reaches the client.
func TestE2EErrorAfterClientEOFCharged(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(mcptest.Budget(1_000_000), "mcp:slow:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("slow", 7)), Token: tok, Upstream: erringAtEOFUpstream()})
	c := p.Raw()
	c.Initialize()
	c.Send(mcptest.CallFrame("5", "slow", map[string]any{}))
	p.WaitLog("upstream started", nil)
	c.Send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	c.Response("6") // the call has been forwarded before the ping's answer
	p.Stdin.Close()
	if m := c.Response("5"); m.Error == nil {
		t.Fatalf("the call was answered %+v; want the upstream's error", m)
	}
	line := p.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "slow" })
	if line["outcome"] != "error after the client closed" || line["cost"] != 7.0 {
		t.Errorf("a call answered with an error after the client's EOF ended %v, charged %v; want charged its reservation of 7", line["outcome"], line["cost"])
	}
}
