//go:build unix

package proxy_test

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A policy file written in place (not by a rename) and read by a reload
// half way: the bytes read are a valid policy that says more than the
// whole file, here "default_cost: 100" cut to "default_cost: 1", a call a
// hundred times cheaper. The reload refuses a file that does not end with
// a newline, and the call still costs 100. Found by the red team: the
// cut file was applied.
func TestE2EReloadHalfWrittenPolicyRefused(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 150, nil)
	pol := r.e.Policy(mcptest.Rule{Match: "echo", Namespace: "mcp", Action: "echo", Cost: -1})
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
	if ls := r.p.LogWith(logReloadRefused, nil); len(ls) != 1 || !strings.Contains(fmt.Sprint(ls[0]["error"]), "does not end with a newline") {
		t.Errorf("refusals logged: %v", ls)
	}
	stopProxy(t, r.p)
}
