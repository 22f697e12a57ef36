package serve_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/receipt"
)

// Two sessions of one server sign their decisions into the server's one
// audit log; once SIGTERM has drained them, the log verifies under the
// server's key, with a receipt for every decision, allowed or refused.
func TestServeEvidenceOneAuditLog(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "server")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := e.Policy()
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol})
	alice := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	bob := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	for i, hdr := range []map[string]string{alice, bob} {
		sid := srv.Initialize(hdr)
		if r := srv.Post(sid, hdr, mcptest.CallBody("1", "echo", map[string]any{"text": "secret-text"})); !strings.Contains(string(r.Body), `"result"`) {
			t.Fatalf("session %d: echo: %d %s", i, r.Status, r.Body)
		}
		if r := srv.Post(sid, hdr, mcptest.CallBody("2", "write_file", map[string]any{"path": "/x", "content": "y"})); !strings.Contains(string(r.Body), "-32001") {
			t.Fatalf("session %d: write_file was not refused: %d %s", i, r.Status, r.Body)
		}
	}
	srv.Signal(syscall.SIGTERM)
	if !srv.WaitExit(20 * time.Second) {
		t.Fatal("serve did not exit after SIGTERM")
	}
	out, stderr, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", key.DID())
	if code != 0 || !strings.HasPrefix(out, "OK audit log") {
		t.Fatalf("audit verify: %d %s %s", code, out, stderr)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("secret-text")) {
		t.Error("an argument is in the audit log in clear")
	}
	count := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		r, err := receipt.ParseEntry(line)
		if err != nil {
			t.Fatal(err)
		}
		switch body := r.Body.(type) {
		case *receipt.DecisionBody:
			count[body.Decision]++
		case *receipt.ExecutionBody:
			count["execution"]++
		}
	}
	if count[receipt.DecisionAllow] != 2 || count[receipt.DecisionBlock] != 2 || count["execution"] != 2 {
		t.Errorf("receipts in the log: %v, want 2 allowed and 2 refused decisions and 2 executions", count)
	}
}
