//go:build unix

package proxy_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// The TypeScript SDK's client.close() sends no DELETE: its session, and
// the upstream process behind it, stayed for the whole --idle-timeout (10
// minutes). delegateos serve now reaps it once its client has had no
// stream open and sent nothing for --abandon-timeout.
func TestServeReapsTypeScriptSDKSessionWithoutDelete(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--abandon-timeout", "1s"}})
	tok := e.Mint(nil, "mcp:echo:*")
	cmd := exec.Command("node", "forget.mjs", srv.URL, tok.String(), "echo", `{"text":"hi"}`)
	cmd.Dir = jsApprover(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node forget.mjs: %v\n%s", err, out)
	}
	sid := strings.TrimSpace(string(out))
	if len(sid) < 8 {
		t.Fatalf("node forget.mjs printed no session id: %q", out)
	}
	started := srv.WaitLog("upstream started", func(m map[string]any) bool { return m["session"] == sid[:8] })
	pid, _ := started["pid"].(float64)
	srv.WaitLog("closing the session", func(m map[string]any) bool {
		r, _ := m["reason"].(string)
		return m["session"] == sid[:8] && strings.Contains(r, "had no stream open and sent nothing for 1s")
	})
	mcptest.Eventually(t, "the forgotten session's upstream to exit", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", int(pid)))
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", int(pid)))
		return err != nil || strings.Contains(string(b), ") Z ")
	})
}
