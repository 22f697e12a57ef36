//go:build linux

package proxy_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// The policy file swapped for a FIFO (a symlink retargeted, a fault)
// when SIGHUP comes: the reload must not wait on it, or the proxy could
// never end (its end waits for a reload under way) and its audit log
// would never be closed. The test holds the FIFO open for writing without
// writing, so a reader blocks for ever. The reload is refused (not a
// regular file), and the proxy ends when its input closes, with an audit
// log that verifies. Found by the red team: the proxy hung.
func TestE2EReloadPolicyFIFORefused(t *testing.T) {
	t.Parallel()
	r := startReloadProxy(t, 1000, nil)
	if err := os.Remove(r.policyPath); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(r.policyPath, 0o600); err != nil {
		t.Fatal(err)
	}
	// A writer that never writes: opened (without waiting) once there is
	// a reader, or by the test itself read-write, so the FIFO always has
	// a writer.
	w, err := os.OpenFile(r.policyPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r.hangup(t, false)
	if !r.call(t, "after", "") {
		t.Fatal("echo refused after a refused reload")
	}
	stopProxy(t, r.p)
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID); code != 0 {
		t.Fatalf("audit verify: %d %s %s", code, out, stderr)
	}
}
