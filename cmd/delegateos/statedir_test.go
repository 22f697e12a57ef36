package main

import (
	"os"
	"testing"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/policy"
)

// The state directory the gate is opened with: DELEGATEOS_STATE_DIR, else
// the policy's state_dir, else the default; never through the process's
// environment (the upstream inherits it).
func TestStateDirForStores(t *testing.T) {
	t.Setenv("DELEGATEOS_STATE_DIR", "/from/env")
	if got := stateDirForStores(&policy.Policy{StateDir: "/from/policy"}); got != "/from/env" {
		t.Errorf("with DELEGATEOS_STATE_DIR: %q", got)
	}
	t.Setenv("DELEGATEOS_STATE_DIR", "")
	t.Setenv("XDG_STATE_HOME", "/xdg")
	if got := stateDirForStores(&policy.Policy{StateDir: "/from/policy"}); got != "/from/policy" {
		t.Errorf("with state_dir: %q", got)
	}
	if got, want := stateDirForStores(&policy.Policy{}), budget.StateDir(); got != want || want != "/xdg/delegateos" {
		t.Errorf("with neither: %q, want %q", got, want)
	}
	if d := os.Getenv("DELEGATEOS_STATE_DIR"); d != "" {
		t.Errorf("DELEGATEOS_STATE_DIR was set in the environment to %q", d)
	}
}
