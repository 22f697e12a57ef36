package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// A Redis password given on the command line is readable by every local
// user (ps, /proc/PID/cmdline): the proxy says so, as it does for a literal
// token, and its log never repeats the password.
// Found by a red team (was TestRedteamRedisPasswordOnCommandLineWarned).
func TestE2ERedisPasswordOnCommandLineWarned(t *testing.T) {
	srv := redistest.Start(t)
	if err := srv.Client().ConfigSet(context.Background(), "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	withPW := strings.Replace(srv.URL(), "redis://", "redis://:s3cret@", 1)
	e := mcptest.NewEnv(t)
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:echo:*"),
		Flags: []string{"--spend-store", withPW}})
	p.Raw().Initialize()
	p.WaitLog("a Redis password was given on the command line, where every local user can read it (ps, /proc/PID/cmdline); give the URL in a policy file only this user can read instead", nil)
	if log := p.Log(); strings.Contains(log, "s3cret") {
		t.Errorf("the log repeats the password:\n%s", log)
	}
}
