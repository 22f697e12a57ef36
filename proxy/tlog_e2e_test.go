//go:build unix

package proxy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/receipt"
)

// treeLog runs a proxy with an audit log (receipts signed by its
// checkpoints only, the default) through n calls, allowed and refused,
// stops it and returns the log's path, its lines and the proxy's did:key.
func treeLog(t *testing.T, n int, extra string) (string, [][]byte, string) {
	t.Helper()
	e := mcptest.NewEnv(t)
	p, logPath, did, _ := evidenceProxy(t, e, extra)
	c := p.Raw()
	c.Initialize()
	for i := 1; i <= n; i++ {
		path := "/project/x.md"
		if i%3 == 0 {
			path = "/etc/passwd"
		}
		c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":"file://%s"}}`, i, path))
		c.NextLine()
	}
	stopProxy(t, p)
	_, lines := logReceipts(t, logPath)
	return logPath, lines, did
}

// The audit log is a Merkle tree whose checkpoints alone are signed (C2SP
// signed notes); every kind of tampering the log can suffer is still
// caught by 'audit verify', and named by its line.
func TestE2ETreeLogTampering(t *testing.T) {
	t.Parallel()
	logPath, lines, did := treeLog(t, 6, "")
	rs, _ := logReceipts(t, logPath)
	last := rs[len(rs)-1]
	if c, ok := last.Body.(*receipt.CheckpointBody); !ok || !c.Final || last.Kind != receipt.KindCheckpoint ||
		!strings.HasPrefix(c.Checkpoint, "audit.delegateos/") || !strings.Contains(c.Checkpoint, "\n\n— audit.delegateos/") {
		t.Fatalf("the log does not end with a final tree checkpoint: %s", lines[len(lines)-1])
	}
	for i, r := range rs[:len(rs)-1] {
		if r.Signed() {
			t.Fatalf("line %d is signed on its own without receipts: {sign_each: true}", i+1)
		}
	}
	out, stderr, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did)
	if code != 0 || !strings.HasPrefix(out, "OK audit log") {
		t.Fatalf("audit verify: %d %s %s", code, out, stderr)
	}
	// A decision, not the first line, to edit.
	edit := -1
	for i, r := range rs {
		if _, ok := r.Body.(*receipt.DecisionBody); ok && i > 0 && i < len(rs)-2 {
			edit = i
			break
		}
	}
	edited := bytes.Replace(lines[edit], []byte(`"enforced":true`), []byte(`"enforced":false`), 1)
	if bytes.Equal(edited, lines[edit]) {
		t.Fatalf("line %d has no enforced:true: %s", edit+1, lines[edit])
	}
	n := len(lines)
	cat := func(parts ...[][]byte) []byte {
		var all [][]byte
		for _, p := range parts {
			all = append(all, p...)
		}
		return bytes.Join(all, nil)
	}
	one := func(b []byte) [][]byte { return [][]byte{b} }
	cases := []struct {
		name, want string
		log        []byte
	}{
		{"edit", fmt.Sprintf("line %d: edited", edit+1), cat(lines[:edit], one(edited), lines[edit+1:])},
		{"drop", "line 2: removed", cat(lines[:1], lines[2:])},
		{"reorder", "line 2: reordered", cat(lines[:1], one(lines[2]), one(lines[1]), lines[3:])},
		{"insert", "line 4: inserted", cat(lines[:3], one(lines[1]), lines[3:])},
		{"truncate", fmt.Sprintf("line %d: truncated", n-1), cat(lines[:n-1])},
		{"truncate mid-entry", fmt.Sprintf("line %d: truncated", n), cat(lines[:n-1], one(lines[n-1][:50]))},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "audit.log")
		if err := os.WriteFile(path, c.log, 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, code := mcptest.CLI(t, "audit", "verify", path, "--key-id", did)
		if code != 1 || !strings.Contains(out, c.want) {
			t.Errorf("%s: audit verify exit %d: %s; want %q", c.name, code, out, c.want)
		}
	}
}
