package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/receipt"
)

// recoveredLog is auditLog with its final checkpoint cut, continued by a
// proxy that started again (one recovery, at entry 4).
func recoveredLog(t *testing.T) (path, did string) {
	t.Helper()
	path, did = auditLog(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = b[:bytes.LastIndexByte(b[:len(b)-1], '\n')+1]
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := identity.FromSeed(bytes.Repeat([]byte{3}, 32), "proxy")
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(path, receipt.NewSigner(k), audit.Options{Receipts: receipt.Options{PolicyHash: strings.Repeat("0", 64)}})
	if err != nil {
		t.Fatal(err)
	}
	if l.Recovered() != 4 {
		t.Fatalf("recovered at %d, want 4", l.Recovered())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path, did
}

// verify fails on a recovery checkpoint, naming it, unless
// --allow-recovered, which lists it (text and --json); show marks it, and
// export works across it.
func TestAuditVerifyRecovered(t *testing.T) {
	path, did := recoveredLog(t)
	want := "line 4: recovered: the log was not closed cleanly before entry 4: receipts of calls made just before may be missing, or entries were removed from its end"
	out, _, code := runAudit(t, "audit", "verify", path, "--key-id", did)
	if code != exitDenied || !strings.HasPrefix(out, "FAILED") || !strings.Contains(out, want) || !strings.Contains(out, "--allow-recovered") {
		t.Fatalf("verify a recovered log (%d):\n%s", code, out)
	}
	out, _, code = runAudit(t, "audit", "verify", path, "--key-id", did, "--allow-recovered")
	if code != exitOK || !strings.HasPrefix(out, "OK audit log") || !strings.Contains(out, want) {
		t.Fatalf("verify --allow-recovered (%d):\n%s", code, out)
	}
	var rep struct {
		OK      bool
		Problem struct {
			Kind  string
			Entry int64
		}
		Report struct{ Recovered []audit.Recovery }
	}
	for _, allow := range []bool{false, true} {
		args := []string{"audit", "verify", path, "--key-id", did, "--json"}
		if allow {
			args = append(args, "--allow-recovered")
		}
		out, _, code = runAudit(t, args...)
		rep.Problem.Kind, rep.Report.Recovered = "", nil
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.OK != allow || (code == exitOK) != allow ||
			len(rep.Report.Recovered) != 1 || rep.Report.Recovered[0] != (audit.Recovery{Entry: 4, Line: 4}) {
			t.Fatalf("verify --json, --allow-recovered %v (%d): %s", allow, code, out)
		}
		if !allow && (rep.Problem.Kind != audit.Recovered || rep.Problem.Entry != 4) {
			t.Fatalf("verify --json: problem %+v", rep.Problem)
		}
	}
	out, _, _ = runAudit(t, "audit", "show", path)
	if !strings.Contains(out, "(recovered: the log was not closed cleanly before it)") {
		t.Fatalf("audit show:\n%s", out)
	}
	dst := filepath.Join(t.TempDir(), "r.jsonl")
	if _, stderr, code := runAudit(t, "audit", "export", path, "--receipt", "2", "--out", dst, "--key-id", did); code != exitOK {
		t.Fatal(stderr)
	}
	if out, _, code := runAudit(t, "audit", "verify", dst, "--key-id", did, "--allow-recovered"); code != exitOK || !strings.Contains(out, "export of receipt 2") {
		t.Fatalf("verify the export: %d %s", code, out)
	}
}
