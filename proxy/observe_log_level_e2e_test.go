//go:build unix

package proxy_test

import (
	"os"
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
