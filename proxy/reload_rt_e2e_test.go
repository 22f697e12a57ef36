//go:build unix

package proxy_test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
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
func TestE2EReloadRTHangupStorm(t *testing.T) {
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
func TestE2EReloadRTHangupThenTerm(t *testing.T) {
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
func TestE2EReloadRTRootsChangedRefusesOldToken(t *testing.T) {
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
