package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/receipt"
)

func runAudit(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// auditLog writes a log with a refused call whose target and detail hold
// terminal escapes, and an allowed one under a token of delegation del_1.
func auditLog(t *testing.T) (path, did string) {
	t.Helper()
	dir := t.TempDir()
	k, err := identity.FromSeed(bytes.Repeat([]byte{3}, 32), "proxy")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := identity.FromSeed(bytes.Repeat([]byte{4}, 32), "agent")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "audit.log")
	l, err := audit.Open(path, receipt.NewSigner(k), audit.Options{Receipts: receipt.Options{PolicyHash: strings.Repeat("0", 64)}, CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	l.Decided(&receipt.Decision{Method: "tools/call", Target: "evil\x1b[2J", Enforced: true, DenialType: "capability_not_granted",
		DenialDetail: "tool \u202egnp.exe", At: at})
	d := &receipt.Decision{Method: "tools/call", Target: "echo", Allowed: true, Enforced: true, At: at.Add(time.Hour),
		Scope: &dct.AuthorizedScope{Delegatee: agent.ID(), Chain: []dct.ChainLink{{DelegationID: "del_1"}}}}
	l.Decided(d)
	l.Executed(&receipt.Execution{Decision: d, Started: d.At, Completed: d.At, Outcome: "result", HasResponse: true})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path, k.DID()
}

func TestAuditShow(t *testing.T) {
	path, _ := auditLog(t)
	out, _, code := runAudit(t, "audit", "show", path)
	if code != exitOK || strings.ContainsAny(out, "\x1b\u202e") || !strings.Contains(out, `\x1b[2J`) {
		t.Fatalf("audit show let escapes through (%d):\n%s", code, out)
	}
	// The token's chain is unknown to the refusal, so the delegation filter
	// keeps the allowed call and its execution.
	out, _, _ = runAudit(t, "audit", "show", path, "--delegation", "del_1")
	if strings.Count(out, "\n") != 2 || !strings.Contains(out, "execution  SUCCESS") {
		t.Fatalf("--delegation del_1:\n%s", out)
	}
	out, _, _ = runAudit(t, "audit", "show", path, "--since", "2026-11-25T10:30:00Z", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// The allowed call, its execution and the final checkpoint.
	if len(lines) != 3 {
		t.Fatalf("--since --json:\n%s", out)
	}
	var e struct {
		Line    int64
		Receipt map[string]any
	}
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil || e.Line != 2 || e.Receipt["resource"] != "echo" {
		t.Fatalf("--json line %s: %v", lines[0], err)
	}
	if _, stderr, code := runAudit(t, "audit", "show", path, "--since", "yesterday"); code != exitUsage || !strings.Contains(stderr, "RFC 3339") {
		t.Fatalf("--since yesterday: %d %s", code, stderr)
	}
}

func TestAuditVerifyJSON(t *testing.T) {
	path, did := auditLog(t)
	out, _, code := runAudit(t, "audit", "verify", path, "--key-id", did, "--json")
	var rep struct {
		OK     bool
		Report struct{ Entries, Last int64 }
	}
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK || rep.Report.Entries != 4 {
		t.Fatalf("verify --json (%d): %s", code, out)
	}
	if _, stderr, code := runAudit(t, "audit", "verify", path, "--key-id", "did:key:nope"); code != exitUsage || !strings.Contains(stderr, "--key-id") {
		t.Fatalf("bad --key-id: %d %s", code, stderr)
	}
	b, _ := os.ReadFile(path)
	cut := filepath.Join(t.TempDir(), "cut.log")
	if err := os.WriteFile(cut, b[:len(b)-10], 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code = runAudit(t, "audit", "verify", cut, "--json")
	if code != exitDenied || !strings.Contains(out, `"kind": "truncated"`) || !strings.Contains(out, `"line": 4`) {
		t.Fatalf("cut log --json (%d): %s", code, out)
	}
}

func TestAuditExportCLI(t *testing.T) {
	path, did := auditLog(t)
	dst := filepath.Join(t.TempDir(), "r.jsonl")
	if _, stderr, code := runAudit(t, "audit", "export", path, "--receipt", "2", "--out", dst, "--key-id", did); code != exitOK {
		t.Fatal(stderr)
	}
	if _, stderr, code := runAudit(t, "audit", "export", path, "--receipt", "2", "--out", dst); code == exitOK || !strings.Contains(stderr, "exists") {
		t.Fatalf("export overwrote %s: %d %s", dst, code, stderr)
	}
	if out, _, code := runAudit(t, "audit", "verify", dst, "--key-id", did); code != exitOK || !strings.Contains(out, "export of receipt 2") {
		t.Fatalf("verify export: %d %s", code, out)
	}
	if _, stderr, code := runAudit(t, "audit", "export", path, "--receipt", "9"); code != exitDenied || !strings.Contains(stderr, "no entry 9") {
		t.Fatalf("export past the end: %d %s", code, stderr)
	}
}

func TestIDPolicy(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, code := runAudit(t, "keygen", "--out", filepath.Join(dir, "proxy.key")); code != exitOK {
		t.Fatal(stderr)
	}
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("proxy_key: proxy.key\naudit_log: audit.log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code := runAudit(t, "id", "--policy", pol)
	want, _, _ := runAudit(t, "id", "--key", filepath.Join(dir, "proxy.key"), "--did")
	if code != exitOK || out != want || !strings.HasPrefix(out, "did:key:z") {
		t.Fatalf("id --policy: %q, want %q", out, want)
	}
	if err := os.WriteFile(pol, []byte("audit_log: audit.log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runAudit(t, "id", "--policy", pol); code != exitUsage || !strings.Contains(stderr, "sets no proxy_key") {
		t.Fatalf("id --policy without proxy_key: %d %s", code, stderr)
	}
}

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
