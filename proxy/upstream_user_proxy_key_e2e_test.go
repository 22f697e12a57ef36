//go:build linux

package proxy_test

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// With --upstream-user, the proxy's signing key must be out of the
// upstream's reach like the audit log: an upstream that can read it signs
// receipts the proxy never made, and one that can replace it has the next
// session's receipts signed by a key of its choosing.
// Found by the red team of the audit log (was TestRedAuditUpstreamUserProxyKey).
func TestE2EUpstreamUserCannotReachProxyKey(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting the upstream as another user needs root; CI runs the tests as root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("this test needs the user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	e := mcptest.NewEnv(t)
	w := newIsolationWorld(t, e, 0o600)
	logs := filepath.Join(w.dir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(w.dir, "keys")
	if err := os.Mkdir(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(keys, "proxy.key")
	k := mcptest.NewKey(t, "proxy")
	if err := identity.SaveKeyFile(key, k); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(w.dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("roots: ["+e.Root.ID()+"]\nproxy_key: "+key+"\naudit_log: "+filepath.Join(logs, "audit.log")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func() (string, int) {
		out, err := exec.Command(mcptest.Delegateos(t), "proxy", "--policy", pol, "--upstream-user", "nobody",
			"--", w.docserver, "--root", e.Docs).CombinedOutput()
		return string(out), exitCode(err)
	}
	// The key belongs to nobody: it reads it (mode 0600 is its own).
	if err := os.Chown(key, uid, -1); err != nil {
		t.Fatal(err)
	}
	if out, code := start(); code != 2 || !strings.Contains(out, "proxy key") {
		t.Errorf("a proxy key the upstream user owns: exit %d:\n%s", code, out)
	}
	// The key is the proxy's, in a directory anyone may write.
	if err := os.Chown(key, 0, -1); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keys, 0o777); err != nil {
		t.Fatal(err)
	}
	if out, code := start(); code != 2 || !strings.Contains(out, "proxy key") {
		t.Errorf("a proxy key in a directory the upstream user may write: exit %d:\n%s", code, out)
	}
}
