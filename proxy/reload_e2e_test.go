//go:build unix

package proxy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/receipt"
)

// Messages of the reload log lines (cmd/delegateos/reload.go).
const (
	logReloaded      = "policy reloaded"
	logReloadRefused = "reload refused: the policy in force is kept"
)

// reloadEnv is a proxy started with --policy on a file the test rewrites,
// with a spend store and an audit log.
type reloadEnv struct {
	e          *mcptest.Env
	policyPath string
	spendPath  string
	auditPath  string
	revPath    string
	keyFile    string
	keyDID     string
	p          *mcptest.Process
	c          *mcptest.Raw
	firstHash  string
	reloads    int // the reloads logged so far
	refusals   int // the refusals logged so far
}

// reloadPolicy is the policy of these tests: echo and elicit priced at
// cost each, under the capabilities the rules give.
func (r *reloadEnv) policy(echoNS, elicitNS string, cost int64, extra string) string {
	pol := r.e.Policy(
		mcptest.Rule{Match: "echo", Namespace: echoNS, Action: "echo", Cost: cost},
		mcptest.Rule{Match: "elicit", Namespace: elicitNS, Action: "elicit", Cost: cost},
	)
	pol.SpendStore, pol.RevocationList = r.spendPath, r.revPath
	pol.Extra = "proxy_key: " + r.keyFile + "\naudit_log: " + r.auditPath + "\n" + extra
	return pol.YAML()
}

func startReloadProxy(t *testing.T, budget int64, wantExit func(int) bool) *reloadEnv {
	t.Helper()
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	r := &reloadEnv{e: e, policyPath: filepath.Join(e.Dir, "reload-policy.yaml"),
		spendPath: filepath.Join(e.Dir, "spend.db"), auditPath: filepath.Join(e.Dir, "audit.log"),
		revPath: filepath.Join(e.Dir, "revocations.json"),
		keyFile: e.KeyFile(key), keyDID: key.DID()}
	mcptest.WriteFile(t, r.revPath, "[]\n")
	r.firstHash = r.write(t, r.policy("mcp", "mcp", 1, ""))
	tok := e.Mint(mcptest.Budget(budget), "mcp:echo:*", "mcp:elicit:*")
	r.p = e.StartProxy(mcptest.ProxyOptions{Token: tok, Flags: []string{"--policy", r.policyPath}, WantExit: wantExit})
	r.c = r.p.Raw()
	r.c.Send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := r.c.Response(`"init"`); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	r.c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

// write replaces the policy file and returns its hash.
func (r *reloadEnv) write(t *testing.T, content string) string {
	t.Helper()
	mcptest.WriteFile(t, r.policyPath, content)
	d := sha256.Sum256([]byte(content))
	return hex.EncodeToString(d[:])
}

// hangup sends SIGHUP and waits for the reload's log line: applied when
// ok, else refused. It returns that line.
func (r *reloadEnv) hangup(t *testing.T, ok bool) map[string]any {
	t.Helper()
	if err := r.p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	return r.waitReload(t, ok)
}

func (r *reloadEnv) waitReload(t *testing.T, ok bool) map[string]any {
	t.Helper()
	msg, n := logReloaded, &r.reloads
	if !ok {
		msg, n = logReloadRefused, &r.refusals
	}
	*n++
	want := *n
	var line map[string]any
	mcptest.Eventually(t, fmt.Sprintf("reload log line %d %q", want, msg), func() bool {
		ls := r.p.LogWith(msg, nil)
		if len(ls) >= want {
			line = ls[want-1]
			return true
		}
		return false
	})
	return line
}

// call calls echo and reports whether it was allowed; a refusal must be
// the denial want ("" for any).
func (r *reloadEnv) call(t *testing.T, id string, want string) bool {
	t.Helper()
	r.c.Send(mcptest.CallFrame(`"`+id+`"`, "echo", map[string]any{"text": id}))
	m := r.c.Response(`"` + id + `"`)
	if m.Error == nil {
		mcptest.ResultText(t, m)
		return true
	}
	if want != "" && !strings.Contains(string(m.Error.Data), want) {
		t.Fatalf("call %s refused with %s %s; want %s", id, m.Error.Message, m.Error.Data, want)
	}
	return false
}

// A reload that narrows the policy refuses the next call, while a call
// decided before it (held by the upstream, which asks the client a
// question) finishes and is charged under the policy that allowed it. The
// reload writes nothing to standard output, and the audit log records it
// and verifies. Before reload, SIGHUP ended the proxy.
func TestE2EReloadNarrowsPolicyCallInFlightFinishes(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 1000, nil)
	if !r.call(t, "before", "") {
		t.Fatal("echo refused before the reload")
	}
	if !r.listsEcho(t, "list-before") {
		t.Fatal("echo not listed before the reload")
	}
	// A call in flight: the upstream waits for the client's answer.
	r.c.Send(mcptest.CallFrame(`"held"`, "elicit", map[string]any{"message": "go on?"}))
	ask := r.c.Next()
	if ask.Method != "elicitation/create" {
		t.Fatalf("got %s %s, want the upstream's elicitation/create", ask.Method, ask.ID)
	}
	newHash := r.write(t, r.policy("admin", "admin", 1, ""))
	line := r.hangup(t, true)
	if line["trigger"] != "SIGHUP" || line["policy_hash"] != newHash {
		t.Errorf("reload line %v", line)
	}
	// Nothing was written to the client on the reload: the next frame is
	// the answer to what the client sends next.
	r.c.Send(`{"jsonrpc":"2.0","id":"ping","method":"ping"}`)
	if m := r.c.Next(); string(m.ID) != `"ping"` || m.Method != "" {
		t.Fatalf("after SIGHUP the client read %s %s before its ping's answer", m.Method, m.ID)
	}
	r.c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"yes"}}}`, ask.ID))
	if m := r.c.Response(`"held"`); m.Error != nil {
		t.Fatalf("the call in flight was disturbed by the reload: %+v", m.Error)
	}
	if r.call(t, "after", "capability_not_granted") {
		t.Fatal("echo allowed after a reload that narrowed it")
	}
	// The session's next list is filtered by the new policy.
	if r.listsEcho(t, "list-after") {
		t.Fatal("echo still listed after a reload that narrowed it")
	}
	stopProxy(t, r.p)
	// Spent: the call before and the call in flight, at 1 each.
	if spent := r.spent(t); spent != 2 {
		t.Errorf("spent %d; want 2", spent)
	}
	rs, _ := logReceipts(t, r.auditPath)
	var hashes []string
	for _, rc := range rs {
		if d, ok := rc.Body.(*receipt.DecisionBody); ok {
			hashes = append(hashes, d.Method+" "+d.Decision+" "+d.PolicyContextHash[:8])
		}
	}
	oldHash := r.firstHash
	want := []string{
		"tools/call ALLOW " + oldHash[:8],
		"tools/call ALLOW " + oldHash[:8],
		"delegateos/reload ALLOW " + newHash[:8],
		"tools/call BLOCK " + newHash[:8],
	}
	if strings.Join(hashes, "\n") != strings.Join(want, "\n") {
		t.Errorf("decision receipts:\n%s\nwant:\n%s", strings.Join(hashes, "\n"), strings.Join(want, "\n"))
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID); code != 0 {
		t.Fatalf("audit verify after a reload: %d %s %s", code, out, stderr)
	}
}

// spent is what the spend store holds as committed, all delegations.
func (r *reloadEnv) spent(t *testing.T) int64 {
	t.Helper()
	u, err := budget.ReadUsage(r.spendPath)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, d := range u {
		n += d.Committed
	}
	return n
}

// A policy that does not load, one that changes what cannot change while
// the proxy runs, and a reload while the revocation list cannot be read
// are each refused with the reason in the log, and the policy in force
// stays: calls go on as before, and nothing is recorded in the audit log
// but the reload that is applied at the end.
func TestE2EReloadRefusedKeepsPolicy(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 1000, nil)
	good := r.policy("mcp", "mcp", 1, "")
	for i, c := range []struct {
		name, policy, why string
		before, after     func()
	}{
		{name: "not YAML", policy: good + "tools: [\n", why: "reload-policy.yaml"},
		{name: "no roots", policy: strings.Replace(good, "roots:\n", "nothing:\n", 1), why: "nothing"},
		{name: "spend store moved", policy: strings.Replace(good, "spend.db", "other.db", 1), why: "spend_store changed"},
		{name: "rate limits", policy: good + "rate: 5/1m\n", why: "rate limits changed"},
		{name: "audit log moved", policy: strings.Replace(good, "audit.log", "other.log", 1), why: "audit_log changed"},
		{name: "revocation list unreadable", policy: good, why: "cannot be read now",
			before: func() { os.Rename(r.revPath, r.revPath+".away") }, after: func() { os.Rename(r.revPath+".away", r.revPath) }},
	} {
		r.write(t, c.policy)
		if c.before != nil {
			c.before()
		}
		line := r.hangup(t, false)
		if errText, _ := line["error"].(string); !strings.Contains(errText, c.why) {
			t.Errorf("%s: refused with %q; want it to say %q", c.name, errText, c.why)
		}
		if c.after != nil {
			c.after()
		}
		if !r.call(t, fmt.Sprintf("kept-%d", i), "") {
			t.Fatalf("%s: the policy in force was not kept", c.name)
		}
	}
	if n := len(r.p.LogWith(logReloaded, nil)); n != 0 {
		t.Fatalf("%d reloads applied; want none", n)
	}
	// Fixed, the same file is applied.
	r.write(t, strings.Replace(good, `namespace: "mcp"`+"\n"+`    action: "echo"`, `namespace: "admin"`+"\n"+`    action: "echo"`, 1))
	r.hangup(t, true)
	if r.call(t, "narrowed", "capability_not_granted") {
		t.Fatal("echo allowed after the reload that narrowed it")
	}
	stopProxy(t, r.p)
	rs, _ := logReceipts(t, r.auditPath)
	reloads := 0
	for _, rc := range rs {
		if d, ok := rc.Body.(*receipt.DecisionBody); ok && d.Method == "delegateos/reload" {
			reloads++
		}
	}
	if reloads != 1 {
		t.Errorf("%d reload receipts; want 1", reloads)
	}
}

// A budget is never reset by a reload: calls spread over reloads are
// allowed exactly up to it, and the spend store holds exactly what was
// allowed, with the cost each call was decided at.
func TestE2EReloadBudgetExactAcrossReloads(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 20, nil)
	allowed, spent := 0, int64(0)
	cost := int64(1)
	for i := range 16 {
		if i > 0 && i%2 == 0 {
			// Every second call the cost changes between 1 and 3.
			cost = 4 - cost
			r.write(t, r.policy("mcp", "mcp", cost, fmt.Sprintf("# reload %d\n", i)))
			r.hangup(t, true)
		}
		if r.call(t, fmt.Sprintf("c%d", i), "") {
			allowed++
			spent += cost
		}
	}
	// 1+1, 3+3, 1+1, 3+3 = 16; then 1+1 = 18; then 3 does not fit (21), nor
	// does the next 3; then 1+1 = 20: one more at 1 would not fit either.
	if spent != 20 || allowed != 12 {
		t.Errorf("allowed %d calls costing %d; want 12 costing 20", allowed, spent)
	}
	stopProxy(t, r.p)
	if got := r.spent(t); got != spent {
		t.Errorf("the spend store holds %d; %d was allowed", got, spent)
	}
}

// The audit log of a proxy reloaded several times verifies; killed with
// SIGKILL after a reload, it verifies once the next proxy has recovered
// it (--allow-recovered), the reload's record included.
func TestE2EReloadAuditLogVerifiesAfterReloadsAndKill(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 1000, func(code int) bool { return code == -1 })
	for i := range 3 {
		r.write(t, r.policy("mcp", "mcp", int64(i+2), ""))
		r.hangup(t, true)
		if !r.call(t, fmt.Sprintf("c%d", i), "") {
			t.Fatal("echo refused")
		}
	}
	// Written before the kill: the reload records and the calls' receipts.
	mcptest.Eventually(t, "the receipts to be written", func() bool {
		b, _ := os.ReadFile(r.auditPath)
		return strings.Count(string(b), `"delegateos/reload"`) == 3 && strings.Count(string(b), "execution_receipt") == 3
	})
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID); code == 0 {
		t.Fatalf("a log still being written verified as closed: %s %s", out, stderr)
	}
	pid := r.p.UpstreamPID()
	if err := r.p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	if !r.p.WaitExit(10 * time.Second) {
		t.Fatal("the killed proxy did not exit")
	}
	tok := r.e.Mint(nil, "mcp:echo:*")
	p := r.e.StartProxy(mcptest.ProxyOptions{Token: tok, Flags: []string{"--policy", r.policyPath}})
	c := p.Raw()
	c.Initialize()
	c.Send(mcptest.CallFrame(`"after"`, "echo", map[string]any{"text": "after"}))
	if m := c.Response(`"after"`); m.Error != nil {
		t.Fatalf("a call after the restart: %+v", m.Error)
	}
	stopProxy(t, p)
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID, "--allow-recovered"); code != 0 {
		t.Fatalf("audit verify after reloads and a kill: %d %s %s", code, out, stderr)
	}
}

// Calls sent back to back while SIGHUPs reload the policy between them,
// its cost changing each time: whichever snapshot decided a call, it is
// settled once, at the cost it was decided at. The spend store holds the
// sum of the costs the allowed calls' receipts reserved, and every
// allowed call has its one execution receipt. The file is replaced by a
// rename, as an editor or a deploy should, so a reload never reads it
// half written.
func TestE2EReloadRacingSettles(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 1_000_000, nil)
	const calls = 40
	for i := range calls {
		if i%5 == 4 {
			tmp := r.policyPath + ".new"
			mcptest.WriteFile(t, tmp, r.policy("mcp", "mcp", int64(1+2*(i/5%2)), fmt.Sprintf("# %d\n", i)))
			if err := os.Rename(tmp, r.policyPath); err != nil {
				t.Fatal(err)
			}
			if err := r.p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
		r.c.Send(mcptest.CallFrame(fmt.Sprintf(`"p%d"`, i), "echo", map[string]any{"text": "x"}))
	}
	for range calls {
		if m := r.c.Next(); m.Error != nil {
			t.Fatalf("a call refused: %+v", m.Error)
		}
	}
	stopProxy(t, r.p)
	if n := len(r.p.LogWith(logReloaded, nil)); n == 0 {
		t.Fatal("no reload was applied")
	}
	rs, _ := logReceipts(t, r.auditPath)
	var reserved int64
	allowed, executed := 0, 0
	for _, rc := range rs {
		switch b := rc.Body.(type) {
		case *receipt.DecisionBody:
			if b.Method == "tools/call" && b.Decision == receipt.DecisionAllow {
				allowed++
				reserved += b.CostReserved
			}
		case *receipt.ExecutionBody:
			executed++
		}
	}
	if allowed != calls || executed != calls {
		t.Errorf("%d calls allowed, %d execution receipts; want %d each", allowed, executed, calls)
	}
	if got := r.spent(t); got != reserved {
		t.Errorf("the spend store holds %d; the allowed calls were decided at %d in all", got, reserved)
	}
}

// listsEcho reports whether tools/list shows echo.
func (r *reloadEnv) listsEcho(t *testing.T, id string) bool {
	t.Helper()
	r.c.Send(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/list"}`)
	m := r.c.Response(`"` + id + `"`)
	if m.Error != nil {
		t.Fatalf("tools/list: %+v", m.Error)
	}
	return strings.Contains(string(m.Result), `"name":"echo"`)
}
