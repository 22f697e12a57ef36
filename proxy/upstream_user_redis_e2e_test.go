//go:build linux

package proxy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// The upstream user runs on the proxy's machine: a Redis the proxy reaches
// without a password, it reaches as well, and there it can erase spend or
// revocations as it could rewrite a file store. A password is a secret
// only where that user cannot read it: not on the command line
// (/proc/PID/cmdline), nor in a policy file it can read.
// Found by a red team (was TestRedteamUpstreamUserReachesRedisStore).
func TestE2EUpstreamUserRedisStoreNeedsHiddenPassword(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting the upstream as another user needs root; CI runs the tests as root")
	}
	e := mcptest.NewEnv(t)
	w := newIsolationWorld(t, e, 0o600)
	srv := redistest.Start(t)
	run := func(args ...string) (int, string) {
		args = append([]string{"proxy", "--root", e.Root.ID(), "--upstream-user", "nobody"}, args...)
		args = append(args, "--", w.docserver, "--root", e.Docs)
		out, err := exec.Command(mcptest.Delegateos(t), args...).CombinedOutput()
		return exitCode(err), string(out)
	}
	if code, out := run("--spend-store", srv.URL()); code != 2 || !strings.Contains(out, "no password") {
		t.Errorf("a Redis spend store without a password: exit %d:\n%s", code, out)
	}
	if code, out := run("--revocations", srv.URL()); code != 2 || !strings.Contains(out, "no password") {
		t.Errorf("a Redis revocation list without a password: exit %d:\n%s", code, out)
	}
	if err := srv.Client().ConfigSet(context.Background(), "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	withPW := strings.Replace(srv.URL(), "redis://", "redis://:s3cret@", 1)
	if code, out := run("--spend-store", withPW); code != 2 || !strings.Contains(out, "command line") || strings.Contains(out, "s3cret") {
		t.Errorf("a Redis password on the command line: exit %d:\n%s", code, out)
	}
	pol := filepath.Join(w.dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("spend_store: "+withPW+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run("--policy", pol); code != 2 || !strings.Contains(out, "can read") || strings.Contains(out, "s3cret") {
		t.Errorf("a Redis password in a policy file the upstream user can read: exit %d:\n%s", code, out)
	}
	// In a policy file it cannot read, the proxy starts and serves.
	good := e.Policy()
	good.SpendStore = withPW
	p := e.StartProxy(mcptest.ProxyOptions{Policy: good, Token: e.Mint(nil, "mcp:echo:*"),
		Upstream: []string{w.docserver, "--root", e.Docs},
		Flags:    []string{"--upstream-user", "nobody"}})
	p.Raw().Initialize()
}
