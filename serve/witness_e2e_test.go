package serve_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// serve publishes its audit log's latest checkpoint and takes a witness's
// cosignatures of it: 'audit witness --log URL' cosigns, and the log then
// verifies with the witness required.
func TestServeWitness(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "server")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := e.Policy()
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	wkey := mcptest.NewKey(t, "witness")
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--witness", wkey.DID()}})
	hdr := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(hdr)
	if r := srv.Post(sid, hdr, mcptest.CallBody("1", "echo", map[string]any{"text": "x"})); !strings.Contains(string(r.Body), `"result"`) {
		t.Fatalf("echo: %d %s", r.Status, r.Body)
	}
	args := []string{"audit", "witness", "--key", e.KeyFile(wkey), "--log", srv.Base, "--log-key", key.DID(), "--state", filepath.Join(e.Dir, "witness.state")}
	// The first checkpoint is written within a second of the call (its
	// interval): the witness is run until the server has published it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, stderr, code := mcptest.CLI(t, args...)
		if code == 0 && strings.HasPrefix(out, "cosigned the checkpoint of") {
			break
		}
		if !strings.Contains(stderr, "no checkpoint") || time.Now().After(deadline) {
			t.Fatalf("audit witness --log URL: %d %s %s", code, out, stderr)
		}
	}
	srv.Signal(syscall.SIGTERM)
	if !srv.WaitExit(20 * time.Second) {
		t.Fatal("serve did not exit after SIGTERM")
	}
	out, stderr, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", key.DID(), "--witness", wkey.DID())
	if code != 0 || !strings.Contains(out, "cosigned the log up to") {
		t.Fatalf("audit verify --witness: %d %s %s", code, out, stderr)
	}
}
