package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With the spend store in Redis, policy check says the rate-limit windows
// are kept in that Redis, without the URL's password (gate's
// TestRatesInRedis opens them there).
func TestPolicyCheckRatesInRedis(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	os.WriteFile(file, []byte("roots: [iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w]\nrate: 5/1m\nspend_store: \"redis://:hunter2@127.0.0.1:1/0\"\n"), 0o600)
	code, out, errs := runCLI("policy", "check", file)
	if code != 0 || !strings.Contains(out, "rate-limit windows:") || !strings.Contains(out, "in Redis, shared by every proxy on redis://:xxxxx@127.0.0.1:1/0") || strings.Contains(out, "hunter2") {
		t.Fatalf("policy check: exit %d\n%s%s", code, out, errs)
	}
}
