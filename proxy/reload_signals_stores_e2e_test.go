//go:build unix

package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/receipt"
)

// Red team of the reload (held): tried a SIGHUP storm, SIGHUP racing
// SIGTERM and a change of roots through the real
// binary.

// fdCount is the number of files the process pid holds open.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// Tried: 400 SIGHUPs as fast as they can be sent, the file unchanged,
// then one change. Held: no file descriptor is kept per reload, the audit
// log records the one change only, nothing reaches standard output, and
// the proxy keeps answering.
func TestE2EReloadHangupStorm(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 1000, nil)
	if !r.call(t, "before", "") {
		t.Fatal("echo refused before the storm")
	}
	pid := r.p.Cmd.Process.Pid
	before := fdCount(t, pid)
	for range 400 {
		if err := r.p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	newHash := r.write(t, r.policy("mcp", "mcp", 2, ""))
	if err := r.p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r.p.WaitLog(logReloaded, func(m map[string]any) bool { return m["policy_hash"] == newHash })
	r.c.Send(`{"jsonrpc":"2.0","id":"ping","method":"ping"}`)
	if m := r.c.Next(); string(m.ID) != `"ping"` || m.Method != "" {
		t.Fatalf("after the storm the client read %s %s before its ping's answer", m.Method, m.ID)
	}
	if after := fdCount(t, pid); after > before+2 {
		t.Errorf("the proxy holds %d files after 400 reloads, %d before", after, before)
	}
	if !r.call(t, "after", "") {
		t.Fatal("echo refused after the storm")
	}
	stopProxy(t, r.p)
	b, err := os.ReadFile(r.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"delegateos/reload"`); n != 1 {
		t.Errorf("%d reload records after a storm of unchanged reloads and one change; want 1", n)
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID); code != 0 {
		t.Fatalf("audit verify after the storm: %d %s %s", code, out, stderr)
	}
}

// Tried: a changed policy, SIGHUP then SIGTERM at once, with a call just
// answered. Held: the proxy ends cleanly and its audit log verifies as
// closed (no --allow-recovered), with or without the reload's record.
func TestE2EReloadHangupThenTerm(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 1000, func(code int) bool { return code >= 0 })
	if !r.call(t, "c1", "") {
		t.Fatal("echo refused")
	}
	r.write(t, r.policy("mcp", "mcp", 5, ""))
	if err := r.p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := r.p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !r.p.WaitExit(30 * time.Second) {
		t.Fatal("the proxy did not exit on SIGTERM after SIGHUP")
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID); code != 0 {
		t.Fatalf("audit verify after SIGHUP then SIGTERM: %d %s %s", code, out, stderr)
	}
}

// Tried: roots changed by a reload to a root that did not issue the
// session's token. Held: the session's next call is refused (the old
// root's token is no longer accepted), and a change back applies.
func TestE2EReloadRootsChangedRefusesOldToken(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 1000, nil)
	if !r.call(t, "before", "") {
		t.Fatal("echo refused before the reload")
	}
	other := mcptest.NewKey(t, "other-root")
	r.write(t, strings.Replace(r.policy("mcp", "mcp", 1, ""), r.e.Root.ID(), other.ID(), 1))
	r.hangup(t, true)
	if r.call(t, "after", "") {
		t.Fatal("a token of a root no longer trusted was accepted after the reload")
	}
	r.write(t, r.policy("mcp", "mcp", 1, ""))
	r.hangup(t, true)
	if !r.call(t, "back", "") {
		t.Fatal("echo refused once the root is trusted again")
	}
	stopProxy(t, r.p)
}

// Tried: two proxies on one policy and one SQLite spend store (rate
// windows in it), a rate of 6 an hour; calls alternate between them
// while the first is reloaded (cost 2↔1) before each of its calls: a
// reload must neither start the windows afresh nor charge twice. Held: exactly 6
// calls are allowed of 10, the store holds the sum of the allowed calls'
// costs, and nothing is left reserved.
func TestE2EReloadSharedStoreRateWindowsKept(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 1000, nil)
	// One audit log per process, in a directory.
	r.auditPath = filepath.Join(r.e.Dir, "audits") + "/"
	r.write(t, r.policy("mcp", "mcp", 1, "rate: 6/1h\n"))
	r.hangup(t, false) // the rate limits cannot change on reload
	// Restarted on the rated policy, so that the windows are the store's.
	stopProxy(t, r.p)
	tok := r.e.Mint(mcptest.Budget(1000), "mcp:echo:*", "mcp:elicit:*")
	a := r.e.StartProxy(mcptest.ProxyOptions{Token: tok, Flags: []string{"--policy", r.policyPath}})
	b := r.e.StartProxy(mcptest.ProxyOptions{Token: tok, Flags: []string{"--policy", r.policyPath}})
	ca, cb := a.Raw(), b.Raw()
	ca.Initialize()
	cb.Initialize()
	allowed, cost := 0, int64(0)
	reloads := 0
	for i := range 10 {
		c := cb
		if i%2 == 0 {
			k := int64(2 - (i/2)%2) // the file in force has cost 1: each reload is a change
			r.write(t, r.policy("mcp", "mcp", k, "rate: 6/1h\n"))
			if err := a.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			reloads++
			want := reloads
			mcptest.Eventually(t, "the reload", func() bool { return len(a.LogWith(logReloaded, nil)) >= want })
			c = ca
		}
		id := fmt.Sprintf(`"c%d"`, i)
		c.Send(mcptest.CallFrame(id, "echo", map[string]any{"text": id}))
		if m := c.Response(id); m.Error == nil {
			allowed++
		} else if !strings.Contains(string(m.Error.Data), "rate") {
			t.Fatalf("call %d refused, not by the rate: %s %s", i, m.Error.Message, m.Error.Data)
		}
	}
	stopProxy(t, a)
	stopProxy(t, b)
	if allowed != 6 {
		t.Errorf("%d calls allowed at a rate of 6 an hour across reloads; want 6", allowed)
	}
	spent := r.spent(t)
	logs, err := filepath.Glob(filepath.Join(r.auditPath, "*.jsonl"))
	if err != nil || len(logs) != 2 {
		t.Fatalf("audit logs %v %v; want one per proxy", logs, err)
	}
	for _, l := range logs {
		rs, _ := logReceipts(t, l)
		for _, rc := range rs {
			if d, ok := rc.Body.(*receipt.DecisionBody); ok && d.Method == "tools/call" && d.Decision == receipt.DecisionAllow {
				cost += d.CostReserved
			}
		}
	}
	if spent != cost {
		t.Errorf("the store holds %d; the allowed calls reserved %d", spent, cost)
	}
}
