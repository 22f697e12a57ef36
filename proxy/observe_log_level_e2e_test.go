//go:build unix

package proxy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/proxy"
)

// Observe mode forwards what the gate would refuse, and the only record
// of that is the refusal's "decision" line, written at info level. A
// policy whose log level is warn or error (a level an operator picks to
// keep a busy log short) drops those lines and the logged banner: the
// proxy then forwards every refused call with nothing in its log to say
// that it did, or that it was not enforcing. The README promises the
// banner "in its log" and a refusal's line "as it would".
// Found by the third red team (was TestRedteam3ObserveLogLevelHidesEverything).
func TestE2EObserveLoggedAtAnyLogLevel(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"warn", "error"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			pol := e.Policy()
			pol.Extra = "log: {level: " + level + "}\n"
			p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: e.Mint(nil, "docs:read:/project/**"), Flags: []string{"--observe"}})
			c := p.Raw()
			c.Initialize()
			c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/project/observed.md","content":"observed"}}}`)
			if m := c.Response("1"); m.Error != nil {
				t.Fatalf("the observed write was refused: %+v", m.Error)
			}
			if _, err := os.Stat(filepath.Join(e.Docs, "project", "observed.md")); err != nil {
				t.Fatalf("the observed write did not reach the upstream: %v", err)
			}
			// The write ran; the log must say that enforcing would have
			// refused it, and that the proxy was not enforcing.
			// The log is complete once the proxy has exited.
			p.Stdin.Close()
			if !p.WaitExit(mcptest.WaitTimeout) {
				t.Fatal("the proxy did not exit")
			}
			if n := len(p.LogWith("decision", func(m map[string]any) bool {
				return m["tool"] == "write_file" && m["enforced"] == false
			})); n != 1 {
				t.Errorf("the observed refusal has %d lines in the log, want 1", n)
			}
			if n := len(p.LogWith(proxy.ObserveBanner, nil)); n != 1 {
				t.Errorf("the banner is in the log %d times, want 1; log:\n%s", n, p.Log())
			}
			if !strings.Contains(p.Stderr.String(), proxy.ObserveBanner) {
				t.Errorf("no banner on stderr")
			}
		})
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
