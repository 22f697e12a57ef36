package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// audit verify --policy checks the policy's audit_log as the log the proxy
// writes: signed by the policy's proxy_key (a log re-signed by another
// key is not the proxy's, whoever signed its first entry), and a log, not
// an export (whose unsigned first line would let a cut log pass as one).
func TestAuditVerifyPolicyIsTheProxysLog(t *testing.T) {
	path, _ := auditLog(t)
	dir := filepath.Dir(path)
	if _, stderr, code := runAudit(t, "keygen", "--out", filepath.Join(dir, "proxy.key")); code != exitOK {
		t.Fatal(stderr)
	}
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("proxy_key: proxy.key\naudit_log: audit.log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, code := runAudit(t, "audit", "verify", "--policy", pol); code == exitOK || !strings.Contains(out, "untrusted") {
		t.Errorf("a log signed by another key than the policy's proxy_key: %d %s", code, out)
	}
	if _, _, code := runAudit(t, "audit", "export", "--policy", pol, "--receipt", "1"); code == exitOK {
		t.Errorf("exported from a log signed by another key than the policy's proxy_key")
	}

	// The proxy's own key, and its log turned into an export.
	if err := os.WriteFile(pol, []byte("audit_log: audit.log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, code := runAudit(t, "audit", "verify", "--policy", pol); code != exitOK {
		t.Fatalf("the log: %d %s", code, out)
	}
	exp, stderr, code := runAudit(t, "audit", "export", path, "--receipt", "1")
	if code != exitOK {
		t.Fatal(stderr)
	}
	if err := os.WriteFile(path, []byte(exp), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, code := runAudit(t, "audit", "verify", "--policy", pol); code == exitOK {
		t.Errorf("the policy's audit_log holds an export, and verifies: %s", out)
	}
}
