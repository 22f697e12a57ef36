package proxy_test

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/receipt"
)

// evidenceTally counts an audit log's receipts: decisions by
// resource and reason, executions by resource and status, approvals by
// resource and decision.
func evidenceTally(t *testing.T, logPath string) (decisions, executions, approvals map[string]int) {
	t.Helper()
	decisions, executions, approvals = map[string]int{}, map[string]int{}, map[string]int{}
	rs, _ := logReceipts(t, logPath)
	for _, r := range rs {
		switch b := r.Body.(type) {
		case *receipt.DecisionBody:
			decisions[b.Resource+" "+b.Reason]++
		case *receipt.ExecutionBody:
			executions[b.Resource+" "+b.Status]++
		case *receipt.HumanApprovalBody:
			approvals[b.Resource+" "+b.Decision]++
		}
	}
	return decisions, executions, approvals
}

func tallyString(m map[string]int) string {
	var ks []string
	for k, n := range m {
		ks = append(ks, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// evidenceApprovalProxy is a proxy with an audit log whose write_file
// asks for approval and whose echo is limited to one call an hour.
func evidenceApprovalProxy(t *testing.T, e *mcptest.Env, o mcptest.ProxyOptions) (*mcptest.Process, string) {
	t.Helper()
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := e.Policy()
	for i := range pol.Rules {
		if pol.Rules[i].Match == "write_file" {
			pol.Rules[i].Cost, pol.Rules[i].Approval = 100, "required"
		}
	}
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	o.Policy = pol
	o.Token = e.Mint(mcptest.Budget(1000), "docs:read:/project/**", "docs:write:/project/**", "mcp:echo:*", "mcp:slow:*")
	return e.StartProxy(o), logPath
}

func initializeEliciting(t *testing.T, c *mcptest.Raw) {
	t.Helper()
	c.Send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := c.Response(`"init"`); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// nextAsk waits for the proxy's approval request and returns its id.
func nextAsk(t *testing.T, c *mcptest.Raw) string {
	t.Helper()
	for {
		m := c.Next()
		if m.Method == "elicitation/create" {
			return string(m.ID)
		}
		if m.Method == "" {
			t.Fatalf("got the response %s %s %+v while waiting for the approval request", m.ID, m.Result, m.Error)
		}
	}
}

// Every gated request leaves exactly one decision receipt however it ends
// — allowed, held and cancelled, held and approved, held when the client
// goes away — and every call that reached the upstream exactly one
// execution receipt, including one still running when the client
// disconnects; a held call that never reached it has none.
// Found by the red team of the stdio relay (was TestRedteamStdioEvidenceEveryEnd).
func TestE2EEvidenceEveryEnd(t *testing.T) {
	e := mcptest.NewEnv(t)
	p, logPath := evidenceApprovalProxy(t, e, mcptest.ProxyOptions{WantExit: func(code int) bool { return code >= 0 }})
	c := p.Raw()
	initializeEliciting(t, c)
	c.Send(mcptest.CallFrame("1", "echo", map[string]any{"text": "x"}))
	mcptest.ResultText(t, c.Response("1"))
	// Held, then cancelled by the client: refused, never forwarded.
	c.Send(mcptest.CallFrame("2", "write_file", writeArgs("/project/two.md")))
	ask := nextAsk(t, c)
	c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	p.WaitLog("approval outcome", func(l map[string]any) bool { return l["verdict"] == "cancelled" })
	c.Send(answer(ask, "accept", true)) // late: dropped
	// Held, then approved: forwarded.
	c.Send(mcptest.CallFrame("3", "write_file", writeArgs("/project/three.md")))
	c.Send(answer(nextAsk(t, c), "accept", true))
	mcptest.ResultText(t, c.Response("3"))
	// Still running when the client goes away.
	c.Send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"slow","arguments":{"steps":1000,"delay_ms":20},"_meta":{"progressToken":"p"}}}`)
	for m := c.Next(); m.Method != "notifications/progress"; m = c.Next() {
	}
	// Held when the client goes away.
	c.Send(mcptest.CallFrame("5", "write_file", writeArgs("/project/five.md")))
	nextAsk(t, c)
	stopProxy(t, p)

	decisions, executions, approvals := evidenceTally(t, logPath)
	wantDecisions := map[string]int{"echo allowed": 1, "write_file approval_declined": 1, "write_file allowed": 1, "slow allowed": 1, "write_file approval_unavailable": 1}
	if got, want := tallyString(decisions), tallyString(wantDecisions); got != want {
		t.Errorf("decision receipts %s, want %s", got, want)
	}
	if executions["echo "+receipt.StatusSuccess] != 1 || executions["write_file "+receipt.StatusSuccess] != 1 ||
		executions["slow "+receipt.StatusUnanswered]+executions["slow "+receipt.StatusFailed] != 1 || len(executions) != 3 {
		t.Errorf("execution receipts %s, want one for echo, the approved write_file and slow", tallyString(executions))
	}
	if approvals["write_file CANCELLED"] != 1 || approvals["write_file APPROVED"] != 1 || approvals["write_file UNAVAILABLE"] != 1 || len(approvals) != 3 {
		t.Errorf("approval receipts %s", tallyString(approvals))
	}
}

// An upstream that dies with a call in flight and another held for
// approval leaves an execution receipt for the one it had (unanswered) and
// a refusal for the held one.
// Found by the red team of the stdio relay (was TestRedteamStdioEvidenceUpstreamCrash).
func TestE2EEvidenceUpstreamCrash(t *testing.T) {
	e := mcptest.NewEnv(t)
	p, logPath := evidenceApprovalProxy(t, e, mcptest.ProxyOptions{WantExit: func(code int) bool { return code != 0 }})
	c := p.Raw()
	initializeEliciting(t, c)
	c.Send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"slow","arguments":{"steps":1000,"delay_ms":20},"_meta":{"progressToken":"p"}}}`)
	for m := c.Next(); m.Method != "notifications/progress"; m = c.Next() {
	}
	c.Send(mcptest.CallFrame("5", "write_file", writeArgs("/project/five.md")))
	nextAsk(t, c)
	if err := syscall.Kill(p.UpstreamPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !p.WaitExit(20 * time.Second) {
		t.Fatal("the proxy did not exit after its upstream died")
	}
	decisions, executions, _ := evidenceTally(t, logPath)
	if decisions["slow allowed"] != 1 || decisions["write_file approval_unavailable"] != 1 || len(decisions) != 2 {
		t.Errorf("decision receipts %s", tallyString(decisions))
	}
	if executions["slow "+receipt.StatusUnanswered] != 1 || len(executions) != 1 {
		t.Errorf("execution receipts %s, want slow unanswered", tallyString(executions))
	}
}

// An approval asked of an MCP 2026-07-28 client (input_required) that
// never sends the call back ends too — with the session, here — and like
// every approval it leaves a human approval receipt, naming the WAITING
// decision it concluded; a held call of an initialize client ends the same
// way.
// Found by the red team of the stdio relay (was TestRedteamStdioEvidenceModernAskAbandoned).
func TestE2EEvidenceModernAskAbandoned(t *testing.T) {
	e := mcptest.NewEnv(t)
	p, logPath := evidenceApprovalProxy(t, e, mcptest.ProxyOptions{})
	c := p.Raw()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/project/a.md","content":"x"},` + meta + `}}`)
	if m := c.Response("1"); m.Error != nil || !strings.Contains(string(m.Result), `"input_required"`) {
		t.Fatalf("the call was answered %s %+v, want input_required", m.Result, m.Error)
	}
	stopProxy(t, p)
	rs, _ := logReceipts(t, logPath)
	var waiting *receipt.DecisionBody
	var approvals []*receipt.HumanApprovalBody
	for _, r := range rs {
		switch b := r.Body.(type) {
		case *receipt.DecisionBody:
			waiting = b
		case *receipt.HumanApprovalBody:
			approvals = append(approvals, b)
		}
	}
	if waiting == nil || waiting.Resource != "write_file" {
		t.Fatalf("decision receipt %+v", waiting)
	}
	if len(approvals) != 1 {
		t.Fatalf("%d human approval receipts for an approval the session ended, want 1", len(approvals))
	}
	if a := approvals[0]; a.Resource != "write_file" || a.Decision != "UNAVAILABLE" || a.GateAuditID != waiting.AuditID || a.AnswerAction != "" {
		t.Errorf("approval receipt %+v; want UNAVAILABLE, naming the decision %s", a, waiting.AuditID)
	}
}

// An approval asked with input_required that expires without the call
// coming back gets its TIMEOUT receipt when the proxy next asks, naming
// its WAITING decision.
// Found by the red team of the stdio relay (was TestRedteamStdioEvidenceModernAskExpired).
func TestE2EEvidenceModernAskExpired(t *testing.T) {
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := e.Policy()
	for i := range pol.Rules {
		if pol.Rules[i].Match == "write_file" {
			pol.Rules[i].Cost, pol.Rules[i].Approval = 100, "{required: true, timeout: 1s}"
		}
	}
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: e.Mint(mcptest.Budget(1000), "docs:write:/project/**")})
	c := p.Raw()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	ask := func(id string) {
		c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/project/a.md","content":"x"},` + meta + `}}`)
		if m := c.Response(id); m.Error != nil || !strings.Contains(string(m.Result), `"input_required"`) {
			t.Fatalf("call %s was answered %s %+v, want input_required", id, m.Result, m.Error)
		}
	}
	ask("1")
	time.Sleep(1100 * time.Millisecond) // past the approval's timeout
	ask("2")
	p.WaitLog("approval outcome", func(l map[string]any) bool { return l["verdict"] == "timeout" })
	stopProxy(t, p)
	rs, _ := logReceipts(t, logPath)
	var waiting []string
	got := map[string]string{} // decision by gate_audit_id
	for _, r := range rs {
		switch b := r.Body.(type) {
		case *receipt.DecisionBody:
			waiting = append(waiting, b.AuditID)
		case *receipt.HumanApprovalBody:
			got[b.GateAuditID] = b.Decision
		}
	}
	if len(waiting) != 2 || got[waiting[0]] != "TIMEOUT" || got[waiting[1]] != "UNAVAILABLE" || len(got) != 2 {
		t.Errorf("decisions %v, approval receipts by decision %v; want the first TIMEOUT, the second UNAVAILABLE", waiting, got)
	}
}
