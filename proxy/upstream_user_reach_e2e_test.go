//go:build linux

package proxy_test

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
	"github.com/delegateos/delegateos/revocation"
)

// --upstream-user keeps the session token from the upstream, and the proxy
// refuses a token file that user can read; but it does not look at what the
// upstream user can write. A revocation list in a directory that user can
// write (the list itself 0644 and the proxy's) is replaced by the upstream
// before it serves: "[]", and a revoked token authorizes calls again. The
// spend store and the workspace's chain log are open to the same swap
// (budget reset, ended delegations live again).
// Found by the second red team (was TestRedteam2UpstreamUserReplacesRevocationList).
func TestE2EUpstreamUserCannotReplaceRevocationList(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting the upstream as another user needs root; CI runs the tests as root")
	}
	e := mcptest.NewEnv(t)
	w := newIsolationWorld(t, e, 0o600)
	revs := filepath.Join(w.dir, "revs")
	if err := os.Mkdir(revs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(revs, 0o777); err != nil { // no sticky bit: any user may rename in it
		t.Fatal(err)
	}
	list := filepath.Join(revs, "revocations.json")
	tok := e.Mint(nil, "mcp:echo:*")
	entry, err := revocation.NewEntry(e.Root, tok.RevocationIDs()[0], revocation.ScopeChain, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := revocation.Append(list, entry); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(list, 0o644); err != nil {
		t.Fatal(err)
	}
	// The upstream as nobody could swap the list (here: before it starts)
	// and so drop its own revocation: the proxy refuses to start.
	cmd := exec.Command(mcptest.Delegateos(t), "proxy", "--root", e.Root.ID(), "--upstream-user", "nobody", "--revocations", list,
		"--", w.docserver, "--root", e.Docs)
	out, err := cmd.CombinedOutput()
	want := "the upstream user could change or replace the revocation list " + list
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), want) {
		t.Errorf("exit %d:\n%s\nwant exit 2 and %q", code, out, want)
	}
	// The same for the spend store.
	spend := filepath.Join(revs, "spend.log")
	cmd = exec.Command(mcptest.Delegateos(t), "proxy", "--root", e.Root.ID(), "--upstream-user", "nobody", "--spend-store", spend,
		"--", w.docserver, "--root", e.Docs)
	out, err = cmd.CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "could change or replace the spend store") {
		t.Errorf("a spend store in a directory nobody may write: exit %d:\n%s", code, out)
	}
	// In a directory only the proxy's user may write, the proxy starts and
	// the revocation holds.
	if err := os.Chmod(revs, 0o755); err != nil {
		t.Fatal(err)
	}
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(),
		Upstream: []string{w.docserver, "--root", e.Docs, "--diagnostics"},
		Flags:    []string{"--upstream-user", "nobody", "--revocations", list}})
	c := p.Raw()
	c.Initialize()
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_delegateos":{"dct":` + mcptest.MustJSON(tok.String()) + `}}}`)
	if m := c.Response("1"); denialType(m) != string(dct.Revoked) {
		t.Errorf("a revoked token was answered %s %+v; want revoked", m.Result, m.Error)
	}
}

// --upstream-user refuses to start when the upstream user could change the
// spend store, the revocation list or the workspace, but it does not look
// at the rate-limit file kept next to the spend store. That file takes the
// mode it already has (OpenFile keeps an existing file's mode for its
// rewrites), so a SPEND_STORE.rates left world-writable (restored from a
// backup, say) is open to the upstream, which can empty it (every window
// starts afresh at the next start of the proxy) or fill it with times in
// the future (every delegation refused). The spend store in the same state
// is refused.
// Found by the third red team (was TestRedteam3UpstreamUserCanRewriteRateFile).
func TestE2EUpstreamUserCannotRewriteRateFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting the upstream as another user needs root; CI runs the tests as root")
	}
	e := mcptest.NewEnv(t)
	w := newIsolationWorld(t, e, 0o600)
	state := filepath.Join(w.dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil { // only root may write in it
		t.Fatal(err)
	}
	spend := filepath.Join(state, "spend.log")
	rates := spend + ".rates"
	if err := os.WriteFile(rates, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rates, 0o666); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(w.dir, "policy.yaml")
	mcptest.WriteFile(t, pol, "roots: ["+e.Root.ID()+"]\nrate: 5/1h\nspend_store: "+spend+"\n")
	cmd := exec.Command(mcptest.Delegateos(t), "proxy", "--policy", pol, "--upstream-user", "nobody", "--", w.docserver, "--root", e.Docs)
	out, err := cmd.CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), rates) {
		t.Errorf("a rate-limit file the upstream user may write: exit %d:\n%s\nwant exit 2 naming %s", code, out, rates)
	}
	// The same with the spend store itself is refused.
	if err := os.Remove(rates); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spend, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(spend, 0o666); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(mcptest.Delegateos(t), "proxy", "--policy", pol, "--upstream-user", "nobody", "--", w.docserver, "--root", e.Docs).CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "could change or replace the spend store") {
		t.Errorf("a spend store the upstream user may write: exit %d:\n%s", code, out)
	}
}

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
