//go:build unix

package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/mark3labs/mcp-go/mcp"
)

// Attacks on the relay through the real binary. Each test here states
// the behaviour the README and docs/ARCHITECTURE.md promise and fails
// while the relay does otherwise.

// modernMeta is the _meta a 2026-07-28 request carries, which makes
// mcp-go's server serve it in the modern era (where subscriptions/listen
// exists).
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// lineClient talks to a process in exact bytes and hands back the exact
// lines it writes, for frames whose members Raw's decoding would hide.
type lineClient struct {
	t     *testing.T
	p     *mcptest.Process
	lines chan string
}

func newLineClient(t *testing.T, p *mcptest.Process) *lineClient {
	c := &lineClient{t: t, p: p, lines: make(chan string, 1024)}
	go func() {
		defer close(c.lines)
		r := bufio.NewReaderSize(p.Stdout, 1<<20)
		for {
			line, err := r.ReadString('\n')
			if len(line) > 0 {
				c.lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

func (c *lineClient) send(frame string) {
	c.t.Helper()
	if _, err := c.p.Stdin.Write([]byte(frame + "\n")); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next line within d, or false.
func (c *lineClient) next(d time.Duration) (string, bool) {
	select {
	case l, ok := <-c.lines:
		return l, ok
	case <-time.After(d):
		return "", false
	}
}

// until returns the first line within d for which match holds.
func (c *lineClient) until(d time.Duration, match func(string) bool) (string, bool) {
	deadline := time.Now().Add(d)
	for {
		l, ok := c.next(time.Until(deadline))
		if !ok {
			return "", false
		}
		if match(l) {
			return l, true
		}
	}
}

// initialize performs the 2025-11-25 handshake.
func (c *lineClient) initialize() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if _, ok := c.until(mcptest.CallTimeout, func(l string) bool { return strings.Contains(l, `"id":"init"`) }); !ok {
		c.t.Fatal("no answer to initialize")
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// response returns the next response line (no method) within CallTimeout.
func (c *lineClient) response() string {
	c.t.Helper()
	l, ok := c.until(mcptest.CallTimeout, func(l string) bool {
		var m struct{ Method string }
		_ = json.Unmarshal([]byte(l), &m)
		return m.Method == ""
	})
	if !ok {
		c.t.Fatal("no response within the timeout")
	}
	return l
}

// subscriptions/listen gates every URI in
// params.notifications.resourceSubscriptions. The relay reads those names
// exactly, and treats a listen without them as list-change opt-ins that
// need no token; the upstream (mcp-go, encoding/json) reads the same
// members in any letter case. A re-cased "Notifications" or
// "ResourceSubscriptions" therefore subscribes to any resource with no
// token at all.
// Found by a red team (was TestRedteamListenCaseVariantSubscribesUngated).
func TestE2EListenCaseVariantGated(t *testing.T) {
	t.Parallel()
	const secret = "file:///project/secret.md"
	for _, notifications := range []string{
		`"Notifications":{"resourceSubscriptions":["` + secret + `"]}`,
		`"notifications":{"ResourceSubscriptions":["` + secret + `"]}`,
		`"NOTIFICATIONS":{"RESOURCESUBSCRIPTIONS":["` + secret + `"]}`,
	} {
		t.Run(notifications[:16], func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			wrap, record := recordUpstream(t, e)
			// No token at all: nothing may be subscribed to.
			p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Wrap: wrap})
			c := newLineClient(t, p)
			c.initialize()
			frame := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{` + modernMeta + `,` + notifications + `}}`
			c.send(frame)
			ack, _ := c.until(3*time.Second, func(l string) bool {
				return strings.Contains(l, "notifications/subscriptions/acknowledged") || strings.Contains(l, `"id":1`)
			})
			if strings.Contains(ack, "acknowledged") && strings.Contains(ack, secret) {
				t.Errorf("sent %s with no token; the upstream subscribed the client to %s: %s", frame, secret, ack)
			}
			c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
			c.until(mcptest.CallTimeout, func(l string) bool { return strings.Contains(l, `"id":2`) })
			for _, line := range upstreamInput(t, record) {
				if strings.Contains(line, "subscriptions/listen") {
					t.Errorf("the upstream received an ungated subscriptions/listen: %s", line)
				}
			}
		})
	}
}

// The upstream tags every message of a subscriptions/listen stream with
// the stream's subscriptionId, the id of the request that opened it (MCP
// 2026-07-28). The relay renumbers requests but does not map that id
// back, so the client gets an id it never sent and cannot tell its
// streams apart.
// Found by a red team (was TestRedteamListenSubscriptionIDIsTheClients).
func TestE2EListenSubscriptionIDIsTheClients(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy()})
	c := newLineClient(t, p)
	c.initialize()
	// Only list-change opt-ins: needs no token, and is forwarded.
	c.send(`{"jsonrpc":"2.0","id":"stream-a","method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"toolsListChanged":true}}}`)
	ack, ok := c.until(mcptest.CallTimeout, func(l string) bool { return strings.Contains(l, "notifications/subscriptions/acknowledged") })
	if !ok {
		t.Fatal("no notifications/subscriptions/acknowledged")
	}
	var m struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(ack), &m); err != nil {
		t.Fatal(err)
	}
	if got := string(m.Params.Meta["io.modelcontextprotocol/subscriptionId"]); got != `"stream-a"` {
		t.Errorf("the stream opened by request \"stream-a\" is acknowledged as subscriptionId %s: %s", got, ack)
	}
}

// scriptedUpstreamEnv makes the test binary, started as an upstream, an
// MCP server that answers each request method with the frame a script
// gives for it ("$ID" stands for the request's id as the upstream got
// it), initialize with a fixed result, and anything else not at all.
const scriptedUpstreamEnv = "DELEGATEOS_TEST_SCRIPTED_UPSTREAM"

func init() {
	if script := os.Getenv(scriptedUpstreamEnv); script != "" {
		os.Exit(runScriptedUpstream(script))
	}
}

// scriptedUpstream writes script to a file in e.Dir and returns the
// command line of an upstream that follows it.
func scriptedUpstream(t *testing.T, e *mcptest.Env, script map[string]string) []string {
	t.Helper()
	path := filepath.Join(e.Dir, "upstream-script.json")
	mcptest.WriteFile(t, path, mcptest.MustJSON(script))
	return []string{"env", scriptedUpstreamEnv + "=" + path, os.Args[0]}
}

func runScriptedUpstream(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 1
	}
	var script map[string]string
	if json.Unmarshal(b, &script) != nil {
		return 1
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue
		}
		frame, ok := script[m.Method]
		if !ok && m.Method == "initialize" {
			frame, ok = `{"jsonrpc":"2.0","id":$ID,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"0"}}}`, true
		}
		if !ok {
			continue
		}
		fmt.Fprintln(out, strings.ReplaceAll(frame, "$ID", string(m.ID)))
		out.Flush()
	}
	return 0
}

// listedTools is what mcp-go's client makes of a tools/list response
// line: the names of the tools it lists.
func listedTools(t *testing.T, line string) []string {
	t.Helper()
	var resp struct {
		Result mcp.ListToolsResult `json:"result"`
		Error  *json.RawMessage    `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &resp); err != nil {
		t.Fatalf("tools/list response %s: %v", line, err)
	}
	if resp.Error != nil {
		// Refusing an answer it cannot read one way is closed too.
		return nil
	}
	var names []string
	for _, tool := range resp.Result.Tools {
		names = append(names, tool.Name)
	}
	return names
}

const (
	echoTool   = `{"name":"echo","inputSchema":{"type":"object"}}`
	getEnvTool = `{"name":"get-env","inputSchema":{"type":"object"}}`
)

// A tools/list result shows the client only the tools its token could
// use. The relay decides whether a response is an error by the first of
// "result" and "error" it meets, and filters only results; a response
// written `"error":null,"result":{...}` (as JSON-RPC 1.0 libraries write
// every response) is a result to every JSON-RPC client, and reaches the
// client unfiltered.
// Found by a red team (was TestRedteamUpstreamNullErrorSkipsListFilter).
func TestE2EUpstreamNullErrorListFiltered(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	up := scriptedUpstream(t, e, map[string]string{
		"tools/list": `{"jsonrpc":"2.0","id":$ID,"error":null,"result":{"tools":[` + echoTool + `,` + getEnvTool + `]}}`,
	})
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:echo:*"), Upstream: up})
	c := newLineClient(t, p)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if got := listedTools(t, c.response()); len(got) != 0 && strings.Join(got, ",") != "echo" {
		t.Errorf("a token for mcp:echo:* is shown the tools %v; want [echo] or a refusal", got)
	}
}

// The same response shape settled a call as if the upstream had refused
// it: the reservation was released, so the client got every result free
// and the budget never ran out. Now such an answer is not relayed, and the
// call is charged.
// Found by a red team (was TestRedteamUpstreamNullErrorCallIsFree).
func TestE2EUpstreamNullErrorCallCharged(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	up := scriptedUpstream(t, e, map[string]string{
		"tools/call": `{"jsonrpc":"2.0","id":$ID,"error":null,"result":{"content":[{"type":"text","text":"done"}]}}`,
	})
	tok := e.Mint(mcptest.Budget(1000), "mcp:echo:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("echo", 600)), Token: tok, Upstream: up})
	c := p.Raw()
	c.Initialize()
	c.Send(mcptest.CallFrame("1", "echo", map[string]any{"text": "a"}))
	if m := c.Response("1"); m.Error == nil || !strings.Contains(m.Error.Message, "read two ways") {
		t.Fatalf("first call: %s %+v; want it refused as ambiguous", m.Result, m.Error)
	}
	c.Send(mcptest.CallFrame("2", "echo", map[string]any{"text": "b"}))
	if m := c.Response("2"); denialType(m) != string(dct.BudgetExceeded) {
		t.Errorf("a second call costing 600 of a budget of 1000, after the first returned a result, was answered %s %+v; want budget_exceeded", m.Result, m.Error)
	}
	line := p.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "echo" && m["allowed"] == true })
	if line["outcome"] != "unreadable" || line["cost"] != 600.0 {
		t.Errorf("a call the upstream answered ambiguously was logged %v, charged %v; want unreadable, 600", line["outcome"], line["cost"])
	}
}

// The relay reads a list result's members exactly ("result", "tools",
// "name"); a Go client (mcp-go's, encoding/json) reads them in any letter
// case and takes the last of a repeated one. A result the filter passes
// as it is can so show the client tools its token may not use.
// Found by a red team (was TestRedteamUpstreamCaseVariantListKeys).
func TestE2EUpstreamCaseVariantListKeysFiltered(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, frame string }{
		{"Tools", `{"jsonrpc":"2.0","id":$ID,"result":{"Tools":[` + echoTool + `,` + getEnvTool + `]}}`},
		{"tools then Tools", `{"jsonrpc":"2.0","id":$ID,"result":{"tools":[` + echoTool + `],"Tools":[` + echoTool + `,` + getEnvTool + `]}}`},
		{"result then Result", `{"jsonrpc":"2.0","id":$ID,"result":{"tools":[` + echoTool + `]},"Result":{"tools":[` + echoTool + `,` + getEnvTool + `]}}`},
		{"name then Name", `{"jsonrpc":"2.0","id":$ID,"result":{"tools":[{"name":"echo","Name":"get-env","inputSchema":{"type":"object"}}]}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			up := scriptedUpstream(t, e, map[string]string{"tools/list": c.frame})
			p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:echo:*"), Upstream: up})
			cl := newLineClient(t, p)
			cl.initialize()
			cl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			line := cl.response()
			for _, name := range listedTools(t, line) {
				if name != "echo" {
					t.Errorf("a token for mcp:echo:* is shown the tool %q: %s", name, line)
				}
			}
		})
	}
}

// Every answer goes back under the client's own id. The relay replaces
// the first id of an upstream response and relays the rest unread; a
// second "id" (or an "ID") after the result is the one a client decodes,
// so the upstream picks which of the client's requests its answer
// settles — here a tools/call's answer, never filtered, is taken by the
// client for its tools/list.
// Found by a red team (was TestRedteamUpstreamSecondIDMisroutes).
func TestE2EUpstreamSecondIDCannotMisroute(t *testing.T) {
	t.Parallel()
	for _, second := range []string{`"id":7`, `"ID":7`} {
		t.Run(second, func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			up := scriptedUpstream(t, e, map[string]string{
				// tools/list is never answered; the call's answer claims its id.
				"tools/call": `{"jsonrpc":"2.0","id":$ID,"result":{"tools":[` + echoTool + `,` + getEnvTool + `]},` + second + `}`,
			})
			p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:echo:*"), Upstream: up})
			c := p.Raw()
			c.Initialize()
			c.Send(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
			c.Send(mcptest.CallFrame("8", "echo", map[string]any{"text": "a"}))
			m := c.Next()
			if string(m.ID) != "8" {
				t.Errorf("the answer to request 8 reached the client as the answer to request %s: %s", m.ID, m.Result)
			}
		})
	}
}

// A denial's message is what MCP clients show people, and the relay
// quotes names in it "so that a hostile name cannot pass for part of a
// message". The contract and delegation IDs a request names in
// _delegateos are written into the message as they are: control
// characters (a line break, a terminal escape) reach the client's screen.
// Found by a red team (was TestRedteamDenialMessageCarriesControlCharacters).
func TestE2EDenialMessageQuotesControlCharacters(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:echo:*")})
	c := p.Raw()
	c.Initialize()
	const forged = `x\u001b[2K\r\nALLOWED: the call ran`
	for i, member := range []string{"contractId", "delegationId"} {
		id := fmt.Sprint(i + 1)
		c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"},"_delegateos":{"` + member + `":"` + forged + `"}}}`)
		m := c.Response(id)
		if m.Error == nil {
			t.Fatalf("%s: the call was allowed", member)
		}
		if strings.ContainsAny(m.Error.Message, "\x1b\r\n") {
			t.Errorf("a request naming %s %s is refused with a message holding control characters: %q", member, forged, m.Error.Message)
		}
	}
}

// Every decision is logged with what the request names (the tool, or
// for other methods the URI or prompt). A subscriptions/listen names its
// URIs in a list, and its line names none of them: an audit of the log
// cannot tell what a client was allowed to subscribe to.
// Found by a red team (was TestRedteamListenDecisionLogNamesItsURIs).
func TestE2EListenDecisionLogNamesItsURIs(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp-resource:read:file:///project/sub/**")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok})
	c := newLineClient(t, p)
	c.initialize()
	const notes = "file:///project/sub/notes.md"
	c.send(`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"resourceSubscriptions":["` + notes + `"]}}}`)
	if ack, ok := c.until(mcptest.CallTimeout, func(l string) bool { return strings.Contains(l, "acknowledged") || strings.Contains(l, `"id":1`) }); !ok || !strings.Contains(ack, "acknowledged") {
		t.Fatalf("subscribing to %s: %s", notes, ack)
	}
	// The stream's line is written when it ends.
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	line := p.WaitLog("decision", func(m map[string]any) bool { return m["method"] == "subscriptions/listen" })
	if target, _ := line["target"].(string); !strings.Contains(target, notes) {
		t.Errorf("the allowed subscriptions/listen is logged with target %q, which does not name %s: %v", target, notes, line)
	}
}

// An upstream's notifications and requests to the client that give a
// member twice: a client would read them one way or the other, so they
// are not relayed (a request is answered to the upstream with an error).
// Found by the red team of receipts and frames (issue 26 item 2) (was TestRTUpstreamRepeatedMemberInNotifications).
func TestE2EUpstreamRepeatedMemberInNotificationsNotRelayed(t *testing.T) {
	e := mcptest.NewEnv(t)
	pol := &mcptest.Policy{AllowUnauthenticated: true}
	notes := []string{
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"message":"ok","message":"rm -rf"}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"a","data":"b"}}`,
		`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1,"maxTokens":100000}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":` + strings.Repeat(`[`, 600) + strings.Repeat(`]`, 600) + `}}`,
		`{"jsonrpc":"2.0","id":"s2","method":"elicitation/create","params":{"message":"Pay 1 EUR?","message":"Pay 1000 EUR?","requestedSchema":{"type":"object","properties":{}}}}`,
	}
	frame := strings.Join(notes, "\n") + "\n" + `{"jsonrpc":"2.0","id":$ID,"result":{"content":[]}}`
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Upstream: lineEchoUpstream(t, e, map[string]string{"tools/call": frame})})
	c := p.Raw()
	c.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	c.Response("0")
	c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"progressToken":"p"}}}`)
	for {
		m := c.Next()
		if m.Method == "" {
			break
		}
		t.Errorf("relayed %s with a member given twice", m.Method)
	}
	// The upstream's two requests were answered to it, with errors: the
	// echo upstream shows what it read since its last answer.
	c.Send(`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"p"}}`)
	got := receivedLine(t, c.Response("3"))
	for _, id := range []string{`"s1"`, `"s2"`} {
		if !strings.Contains(got, `"id":`+id+`,"error":{"code":-32600`) {
			t.Errorf("the upstream's request %s got no error answer; it read:\n%s", id, got)
		}
	}
}

// Upstream answers that give a member twice, in places the result check
// might not look: the error object, a notification, a vendor method's
// result, a name hidden by an escape or by a BOM/whitespace variant.
// Found by the red team of receipts and frames (issue 26 item 2) (was TestRTUpstreamRepeatedMembersElsewhere).
func TestE2EUpstreamRepeatedMembersElsewhere(t *testing.T) {
	e := mcptest.NewEnv(t)
	pol := &mcptest.Policy{AllowUnauthenticated: true, Extra: vendorMethods}
	cases := map[string]string{
		"error":       `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32000,"message":"a","message":"b"}}`,
		"errordata":   `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32000,"message":"a","data":{"x":1,"\u0078":2}}}`,
		"toplevel":    `{"jsonrpc":"2.0","id":$ID,"result":{"content":[]},"result":{"content":[{"type":"text","text":"evil"}]}}`,
		"resulterror": `{"jsonrpc":"2.0","id":$ID,"result":{"content":[]},"error":{"code":1,"message":"x"}}`,
		"invalidutf8": "{\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"a\xff\":1,\"a\xfe\":2}}",
		"surrogate":   `{"jsonrpc":"2.0","id":$ID,"result":{"\ud800":1,"\udbff":2}}`,
		"deep":        `{"jsonrpc":"2.0","id":$ID,"result":{"content":[],"x":` + strings.Repeat(`[`, 600) + strings.Repeat(`]`, 600) + `}}`,
		"deeplast":    `{"jsonrpc":"2.0","result":{"content":[],"x":` + strings.Repeat(`[`, 600) + strings.Repeat(`]`, 600) + `},"id":$ID}`,
		"deeperror":   `{"jsonrpc":"2.0","id":$ID,"error":{"code":1,"message":"x","data":` + strings.Repeat(`{"a":`, 600) + `1` + strings.Repeat(`}`, 600) + `}}`,
		"deepdup":     `{"jsonrpc":"2.0","id":$ID,"result":{"content":[],"x":` + strings.Repeat(`[`, 505) + `{"k":1,"k":2}` + strings.Repeat(`]`, 505) + `}}`,
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Upstream: lineEchoUpstream(t, e, map[string]string{"tools/call": frame, "acme/search": frame})})
			c := p.Raw()
			c.Initialize()
			c.Send(mcptest.CallFrame("1", "echo", map[string]any{"t": "a"}))
			m := c.Response("1")
			c.Send(`{"jsonrpc":"2.0","id":2,"method":"acme/search","params":{}}`)
			m2 := c.Response("2")
			for _, mm := range []mcptest.RawMessage{m, m2} {
				if mm.Error == nil || mm.Error.Code != -32603 {
					t.Errorf("%s: relayed as %s %+v; want -32603", name, mm.Result, mm.Error)
				}
			}
		})
	}
}
