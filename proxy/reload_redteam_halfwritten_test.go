//go:build unix && redteam

package proxy_test

import (
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team: broke. A policy file written in place (not by a rename) and
// read by a reload half way: the bytes read are a valid policy that says
// more than either the old or the new file, here "default_cost: 100"
// cut to "default_cost: 1", a call a hundred times cheaper. docs/serve.md
// says a half-written file "may find a valid policy that says less"; it
// may say more.
func TestE2ERedteamReloadHalfWrittenPolicyWidens(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 150, nil)
	pol := r.e.Policy(mcptest.Rule{Match: "echo", Namespace: "mcp", Action: "echo"})
	pol.SpendStore, pol.RevocationList = r.spendPath, r.revPath
	pol.Extra = "proxy_key: " + r.keyFile + "\naudit_log: " + r.auditPath + "\n"
	full := regexp.MustCompile(`(?m)^default_cost: .*\n`).ReplaceAllString(pol.YAML(), "") + "default_cost: 100\n"
	r.write(t, full)
	r.hangup(t, true)
	if !r.call(t, "c1", "") {
		t.Fatal("echo at 100 refused with a budget of 150")
	}
	// The writer has written all but the last bytes ("00\n") when the
	// SIGHUP comes.
	half := strings.TrimSuffix(full, "00\n")
	if half == full {
		t.Fatal("the policy does not end with default_cost: 100")
	}
	r.write(t, half)
	if err := r.p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r.c.Send(`{"jsonrpc":"2.0","id":"ping","method":"ping"}`)
	r.c.Response(`"ping"`)
	mcptest.Eventually(t, "the reload of the half-written file to be logged", func() bool {
		return len(r.p.LogWith(logReloaded, nil))+len(r.p.LogWith(logReloadRefused, nil)) >= 2
	})
	if r.call(t, "c2", "") {
		t.Fatal("a half-written policy was applied: a second call at what should cost 100 fit a budget of 150")
	}
	stopProxy(t, r.p)
}
