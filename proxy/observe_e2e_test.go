//go:build unix

package proxy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/proxy"
)

// observedRequest is a request the gate refuses, of each gated kind.
type observedRequest struct {
	method, target, params string
}

const secretURI = "file:///project/secret.md"

var observedRequests = []observedRequest{
	{"tools/call", "write_file", `{"name":"write_file","arguments":{"path":"/project/observed.md","content":"written in observe mode"}}`},
	{"resources/read", secretURI, `{"uri":"` + secretURI + `"}`},
	{"resources/subscribe", secretURI, `{"uri":"` + secretURI + `"}`},
	{"prompts/get", "summarize", `{"name":"summarize","arguments":{"path":"/project/secret.md"}}`},
	{"completion/complete", "summarize", `{"ref":{"type":"ref/prompt","name":"summarize"},"argument":{"name":"path","value":"/pro"}}`},
}

// The same session with and without --observe: with it, every request
// the gate refuses (of each gated kind, and for want of budget) reaches
// the upstream and is answered by it, logged once as the refusal it would
// be with "enforced": false, and charged nothing; lists come unfiltered,
// with a line naming what would be hidden; what the relay cannot read
// unambiguously is still refused; the banner is on stderr and in the log.
// Without it, nothing of that happens.
func TestE2EObserve(t *testing.T) {
	t.Parallel()
	for _, observe := range []bool{true, false} {
		t.Run(fmt.Sprintf("observe=%v", observe), func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			wrap, record := recordUpstream(t, e)
			tok := e.Mint(mcptest.Budget(12), "mcp:echo:*", "docs:read:/project/**", "mcp-resource:read:file:///project/sub/**", "mcp-prompt:get:greeting")
			o := mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("echo", 5)), Token: tok, Wrap: wrap}
			if observe {
				o.Flags = []string{"--observe"}
			}
			p := e.StartProxy(o)
			c := p.Raw()
			c.Initialize()

			for i, r := range observedRequests {
				id := fmt.Sprint(10 + i)
				c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + r.method + `","params":` + r.params + `}`)
				m := c.Response(id)
				if got := denialType(m); observe && got != "" || !observe && got != string(dct.CapabilityNotGranted) {
					t.Errorf("%s %s was answered %+v", r.method, r.target, m.Error)
				}
			}
			// A listen for the secret: acknowledged by the upstream under the
			// client's id, or refused.
			c.Send(`{"jsonrpc":"2.0","id":"listen","method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"resourceSubscriptions":["` + secretURI + `"]}}}`)
			m := c.Next()
			if observe && (m.Method != "notifications/subscriptions/acknowledged") || !observe && denialType(m) != string(dct.CapabilityNotGranted) {
				t.Errorf("subscriptions/listen was answered %+v", m)
			}
			c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"listen"}}`)

			// Two calls at 5 fit a budget of 12; the third and fourth do
			// not, and the fourth's denial shows the third was not charged.
			for i := range 4 {
				id := fmt.Sprint(20 + i)
				c.Send(mcptest.CallFrame(id, "echo", map[string]any{"text": "e" + id}))
				m := c.Response(id)
				if i < 2 || observe {
					if got := mcptest.ResultText(t, m); !strings.Contains(got, "e"+id) {
						t.Errorf("echo %s returned %q", id, got)
					}
				} else if denialType(m) != string(dct.BudgetExceeded) {
					t.Errorf("echo %s was answered %+v; want budget_exceeded", id, m.Error)
				}
			}

			// Still refused: a re-cased member and an unknown method.
			c.Send(`{"jsonrpc":"2.0","id":30,"method":"resources/read","params":{"uri":"file:///project/sub/notes.md","URI":"` + secretURI + `"}}`)
			if m := c.Response("30"); m.Error == nil || m.Error.Code != -32600 {
				t.Errorf("a re-cased uri was answered %+v; want -32600", m.Error)
			}
			c.Send(`{"jsonrpc":"2.0","id":31,"method":"admin/shutdown"}`)
			if m := c.Response("31"); m.Error == nil || m.Error.Code != -32601 {
				t.Errorf("an unknown method was answered %+v; want -32601", m.Error)
			}

			c.Send(`{"jsonrpc":"2.0","id":40,"method":"tools/list"}`)
			tools := rawToolNames(t, c.Response("40"))
			if slices.Contains(tools, "write_file") != observe {
				t.Errorf("tools/list shows %v", tools)
			}

			// Last, an allowed call: once its line is written, every earlier
			// answer has been handled.
			c.Send(`{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/project/sub/notes.md"}}}`)
			mcptest.ResultText(t, c.Response("50"))
			p.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "read_file" })

			checkObservedLog(t, p, observe)
			checkObservedUpstream(t, e, record, observe)
			if has := strings.Contains(p.Stderr.String(), proxy.ObserveBanner); has != observe {
				t.Errorf("stderr has the banner: %v; stderr:\n%s", has, p.Stderr.String())
			}
			if n := len(p.LogWith(proxy.ObserveBanner, nil)); n != map[bool]int{true: 1, false: 0}[observe] {
				t.Errorf("the banner is logged %d times", n)
			}
		})
	}
}

// checkObservedLog checks the decision lines of TestE2EObserve's session:
// one per request, refusals marked "enforced": false only when observed,
// and the budget refusals charging nothing.
func checkObservedLog(t *testing.T, p *mcptest.Process, observe bool) {
	t.Helper()
	lines := p.LogWith("decision", nil)
	type key struct{ what, reason string }
	got := map[key]int{}
	for _, m := range lines {
		what, _ := m["tool"].(string)
		if what == "" {
			what = m["method"].(string) + " " + m["target"].(string)
		}
		reason, _ := m["reason"].(string)
		got[key{what, reason}]++
		enforced, has := m["enforced"]
		switch {
		case m["allowed"] == true && has:
			t.Errorf("an allowed call's line has enforced: %v", m)
		case m["allowed"] == false && observe && enforced != false:
			t.Errorf("an observed refusal's line lacks enforced false: %v", m)
		case m["allowed"] == false && !observe && has:
			t.Errorf("an enforced refusal's line has enforced: %v", m)
		case m["allowed"] == false && (m["detail"] == "" || m["outcome"] != nil):
			t.Errorf("a refusal's line: %v", m)
		}
		if detail, _ := m["detail"].(string); reason == string(dct.BudgetExceeded) && !strings.Contains(detail, "has spent 10 of 12") {
			t.Errorf("a budget refusal says %q; want spent 10 of 12, the refused calls charged nothing", detail)
		}
	}
	want := map[key]int{
		{"echo", "granted"}:         2,
		{"echo", "budget_exceeded"}: 2,
		{"read_file", "granted"}:    1,
		{"subscriptions/listen " + secretURI, "capability_not_granted"}: 1,
	}
	for _, r := range observedRequests {
		what := r.target
		if r.method != "tools/call" {
			what = r.method + " " + r.target
		}
		want[key{what, "capability_not_granted"}] = 1
	}
	if len(got) != len(want) {
		t.Errorf("decision lines %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d lines for %v, want %d (all: %v)", got[k], k, n, got)
		}
	}
	listLines := p.LogWith("list not filtered", nil)
	if !observe {
		if len(listLines) != 0 {
			t.Errorf("list lines without observe mode: %v", listLines)
		}
		return
	}
	if len(listLines) != 1 {
		t.Fatalf("%d list lines, want 1", len(listLines))
	}
	hidden, _ := listLines[0]["would_hide"].([]any)
	if listLines[0]["method"] != "tools/list" || listLines[0]["enforced"] != false || !slices.Contains(hidden, any("write_file")) || slices.Contains(hidden, any("echo")) {
		t.Errorf("the list line: %v", listLines[0])
	}
}

// checkObservedUpstream checks what reached the upstream: every refused
// request when observed, none otherwise, and never what the relay could
// not read.
func checkObservedUpstream(t *testing.T, e *mcptest.Env, record string, observe bool) {
	t.Helper()
	input := strings.Join(upstreamInput(t, record), "\n")
	for _, r := range append(observedRequests, observedRequest{method: "subscriptions/listen", target: secretURI}) {
		sent := strings.Contains(input, `"method":"`+r.method+`"`)
		if r.method == "tools/call" {
			sent = strings.Contains(input, `"name":"write_file"`)
		}
		if sent != observe {
			t.Errorf("the upstream received %s %s: %v", r.method, r.target, sent)
		}
	}
	if n := strings.Count(input, `"name":"echo"`); n != map[bool]int{true: 4, false: 2}[observe] {
		t.Errorf("the upstream received %d echo calls", n)
	}
	for _, bad := range []string{`"URI"`, "admin/shutdown"} {
		if strings.Contains(input, bad) {
			t.Errorf("the upstream received %s", bad)
		}
	}
	_, err := os.Stat(filepath.Join(e.Docs, "project", "observed.md"))
	if written := err == nil; written != observe {
		t.Errorf("write_file wrote its file: %v", written)
	}
}

// toolNames are the names in a tools/list result.
func rawToolNames(t *testing.T, m mcptest.RawMessage) []string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("tools/list: %+v", m.Error)
	}
	var r struct {
		Tools []struct{ Name string }
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range r.Tools {
		names = append(names, tool.Name)
	}
	return names
}
