//go:build unix

package proxy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
	pol.SpendStore = r.spendPath
	pol.Extra = "proxy_key: " + r.keyFile + "\naudit_log: " + r.auditPath + "\n" + extra
	return pol.YAML()
}

func startReloadProxy(t *testing.T, budget int64, wantExit func(int) bool) *reloadEnv {
	t.Helper()
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	r := &reloadEnv{e: e, policyPath: filepath.Join(e.Dir, "reload-policy.yaml"),
		spendPath: filepath.Join(e.Dir, "spend.db"), auditPath: filepath.Join(e.Dir, "audit.log"),
		keyFile: e.KeyFile(key), keyDID: key.DID()}
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
