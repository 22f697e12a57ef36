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
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	runTreeProxy(t, e, e.KeyFile(key), logPath, n, extra)
	_, lines := logReceipts(t, logPath)
	return logPath, lines, key.DID()
}

// runTreeProxy runs a proxy signing with key into logPath through n
// resources/read calls (every third refused) and stops it.
func runTreeProxy(t *testing.T, e *mcptest.Env, keyFile, logPath string, n int, extra string) {
	t.Helper()
	pol := e.Policy()
	pol.Extra = "proxy_key: " + keyFile + "\naudit_log: " + logPath + "\n" + extra
	tok := e.Mint(nil, "mcp-resource:read:file:///project/**")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
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

// A receipt proves itself offline: 'audit prove' bundles it with its
// inclusion proof and the signed checkpoint, which 'audit verify-receipt'
// checks with the proxy's did:key alone; 'audit consistency' shows the log
// a later proxy run continued extends its earlier copy, and catches a log
// rewritten since; 'audit export --avp' still gives a receipt signed alone.
func TestE2ETreeLogProofs(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	did, keyFile := key.DID(), e.KeyFile(key)
	logPath := filepath.Join(e.Dir, "audit.log")
	runTreeProxy(t, e, keyFile, logPath, 4, "")
	old := filepath.Join(e.Dir, "old.log")
	copyFile(t, logPath, old, 0o600)
	runTreeProxy(t, e, keyFile, logPath, 3, "")

	bundle := filepath.Join(e.Dir, "r2.bundle")
	if _, stderr, code := mcptest.CLI(t, "audit", "prove", "--receipt", "2", logPath, "--key-id", did, "--out", bundle); code != 0 {
		t.Fatalf("audit prove: %d %s", code, stderr)
	}
	out, stderr, code := mcptest.CLI(t, "audit", "verify-receipt", "--key-id", did, bundle)
	if code != 0 || !strings.HasPrefix(out, "OK receipt 2 (") {
		t.Fatalf("audit verify-receipt: %d %s %s", code, out, stderr)
	}
	other := mcptest.NewKey(t, "other").DID()
	if out, _, code := mcptest.CLI(t, "audit", "verify-receipt", "--key-id", other, bundle); code != 1 || !strings.Contains(out, "not signed by") {
		t.Fatalf("verify-receipt under another key: %d %s", code, out)
	}
	b, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	forged := filepath.Join(e.Dir, "forged.bundle")
	mcptest.WriteFile(t, forged, strings.Replace(string(b), `file:///project/x.md`, `file:///project/y.md`, 1))
	if out, _, code := mcptest.CLI(t, "audit", "verify-receipt", "--key-id", did, forged); code != 1 || !strings.Contains(out, "inclusion proof") {
		t.Fatalf("verify-receipt of an edited receipt: %d %s", code, out)
	}

	if out, stderr, code := mcptest.CLI(t, "audit", "consistency", old, logPath, "--key-id", did); code != 0 || !strings.HasPrefix(out, "OK") {
		t.Fatalf("audit consistency: %d %s %s", code, out, stderr)
	}
	// The same key rewrites the log: it verifies on its own, but not as an
	// extension of the copy taken before.
	e2 := mcptest.NewEnv(t)
	rewritten := filepath.Join(e2.Dir, "audit.log")
	runTreeProxy(t, e2, keyFile, rewritten, 9, "")
	if out, _, code := mcptest.CLI(t, "audit", "verify", rewritten, "--key-id", did); code != 0 {
		t.Fatalf("the rewritten log: %s", out)
	}
	if out, _, code := mcptest.CLI(t, "audit", "consistency", old, rewritten, "--key-id", did); code != 1 || !strings.Contains(out, "not an extension") {
		t.Fatalf("consistency with a rewritten log: %d %s", code, out)
	}

	// export --avp: the receipt alone, signed now by the proxy key.
	if _, stderr, code := mcptest.CLI(t, "audit", "export", "--receipt", "2", "--avp", logPath); code != 1 || !strings.Contains(stderr, "proxy key") {
		t.Fatalf("export --avp without the key: %d %s", code, stderr)
	}
	out, stderr, code = mcptest.CLI(t, "audit", "export", "--receipt", "2", "--avp", "--key", keyFile, logPath, "--key-id", did)
	if code != 0 {
		t.Fatalf("export --avp: %d %s", code, stderr)
	}
	r, err := receipt.Parse([]byte(strings.TrimSuffix(out, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify([]string{did}); err != nil || r.Position().Seq != 2 {
		t.Fatalf("the AVP receipt: %v (entry %d)", err, r.Position().Seq)
	}
}

// A witness cosigns the proxy's checkpoints ('audit witness'), 'audit
// verify --witness' and 'audit verify-receipt --witness' require its
// cosignature, and a proxy that rewrites its log after the witness
// cosigned is caught by both the witness and verify.
func TestE2EWitnessForkAfterCosign(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	did, keyFile := key.DID(), e.KeyFile(key)
	wkey := mcptest.NewKey(t, "witness")
	wdid, wfile := wkey.DID(), e.KeyFile(wkey)
	logPath := filepath.Join(e.Dir, "audit.log")
	state := filepath.Join(e.Dir, "witness.state")
	witness := func() (string, int) {
		out, stderr, code := mcptest.CLI(t, "audit", "witness", "--key", wfile, "--log", logPath, "--log-key", did, "--state", state)
		return out + stderr, code
	}
	runTreeProxy(t, e, keyFile, logPath, 3, "")
	if out, code := witness(); code != 0 || !strings.HasPrefix(out, "cosigned the checkpoint of") {
		t.Fatalf("audit witness: %d %s", code, out)
	}
	runTreeProxy(t, e, keyFile, logPath, 2, "")
	if out, code := witness(); code != 0 {
		t.Fatalf("audit witness of the grown log: %d %s", code, out)
	}
	out, stderr, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did, "--witness", wdid)
	if code != 0 || !strings.Contains(out, "witness "+wdid+" cosigned") {
		t.Fatalf("audit verify --witness: %d %s %s", code, out, stderr)
	}
	other := mcptest.NewKey(t, "other").DID()
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did, "--witness", other); code != 1 || !strings.Contains(out, "unwitnessed") {
		t.Fatalf("audit verify with a witness that cosigned nothing: %d %s", code, out)
	}
	bundle := filepath.Join(e.Dir, "r1.bundle")
	if _, stderr, code := mcptest.CLI(t, "audit", "prove", "--receipt", "1", logPath, "--out", bundle); code != 0 {
		t.Fatal(stderr)
	}
	if out, _, code := mcptest.CLI(t, "audit", "verify-receipt", "--key-id", did, "--witness", wdid, bundle); code != 0 || !strings.Contains(out, "cosigned by the witness") {
		t.Fatalf("verify-receipt --witness: %d %s", code, out)
	}

	// The proxy's key rewrites the log: another run, into its place.
	e2 := mcptest.NewEnv(t)
	forked := filepath.Join(e2.Dir, "audit.log")
	runTreeProxy(t, e2, keyFile, forked, 8, "")
	b, err := os.ReadFile(forked)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did); code != 0 {
		t.Fatalf("the rewritten log does not verify on its own: %s", out)
	}
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did, "--witness", wdid); code != 1 || !strings.Contains(out, "forked") {
		t.Fatalf("audit verify --witness of the rewritten log: %d %s", code, out)
	}
	if out, code := witness(); code != 1 || !strings.HasPrefix(out, "FORK") {
		t.Fatalf("audit witness of the rewritten log: %d %s", code, out)
	}
}

// receipts: {sign_each: true} keeps every receipt signed on its own, as
// before the tree log, in the same tree.
func TestE2ETreeLogSignEach(t *testing.T) {
	t.Parallel()
	logPath, lines, did := treeLog(t, 3, "receipts: {sign_each: true}\n")
	rs, _ := logReceipts(t, logPath)
	for i, r := range rs {
		if !r.Signed() || r.Verify([]string{did}) != nil {
			t.Fatalf("line %d is not signed on its own with sign_each: %s", i+1, lines[i])
		}
	}
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did); code != 0 || strings.Contains(out, "not on their own") {
		t.Fatalf("audit verify: %d %s", code, out)
	}
}
