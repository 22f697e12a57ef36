//go:build unix

package proxy_test

import (
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team 7 (rtstore7), RT7-3: HOME odd — unset (empty), with neither
// DELEGATEOS_STATE_DIR nor XDG_STATE_HOME (a stdio proxy launched by an
// MCP client with a cleaned environment, `env -i`, a container or
// service without HOME). budget.StateDir() then returns "" and the Redis
// spend store runs with no state directory at all: no machine-id (no
// m:), no counts file, no live record, no journal — it was only a
// warning in the log. A proxy restarted after Redis went back to an
// older snapshot (a failover to a lagging replica) takes the tree as it is and spends
// the budget again; with HOME set it would refuse store_reset (the
// restart case of proxy/fleet_store_loss_e2e_test.go).
//
// Broke before (40 calls on 30: the restarted proxy spent the budget
// again); held: proxy and serve refuse to start (exit 2) when the policy
// names a Redis store and there is no state directory, saying to set
// DELEGATEOS_STATE_DIR.
func TestE2EFaultNoStateDirRefused(t *testing.T) {
	f := newStoreFleet(t)
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, Env: []string{"DELEGATEOS_STATE_DIR=", "XDG_STATE_HOME=", "HOME="}, WantExit: func(code int) bool { return code == 2 }})
	if !p.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("the proxy started with a Redis store and no state directory")
	}
	if e := p.Stderr.String(); !strings.Contains(e, "no state directory") || !strings.Contains(e, "DELEGATEOS_STATE_DIR") {
		t.Errorf("want a refusal saying there is no state directory and to set DELEGATEOS_STATE_DIR, got: %s", e)
	}
}
