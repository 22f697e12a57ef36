package gate

import (
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
)

// Open sorts what it refuses into settings to change and stores that
// cannot be opened, naming the flag a setting came from; what it opens it
// hands to the Gate, and Close releases it.
func TestOpen(t *testing.T) {
	root := "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w"
	var se *SettingError
	if _, err := Open(&policy.Policy{}, Options{}); !errors.As(err, &se) || !strings.Contains(err.Error(), "no trusted roots") {
		t.Errorf("no roots: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none.json")
	var oe *StoreError
	_, err := Open(&policy.Policy{Roots: []string{root}, RevocationList: missing}, Options{RevocationListFrom: "--revocations"})
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "fix --revocations") {
		t.Errorf("missing revocation list: %v", err)
	}
	// A relative state directory would keep each working directory's
	// copies apart: refused for the Redis stores, before Redis is reached.
	t.Setenv("DELEGATEOS_STATE_DIR", "")
	for _, p := range []*policy.Policy{{Roots: []string{root}, RevocationList: "redis://127.0.0.1:1/0"}, {Roots: []string{root}, SpendStore: "redis://127.0.0.1:1/0"}} {
		if _, err := Open(p, Options{StateDir: "state"}); !errors.As(err, &oe) || !strings.Contains(err.Error(), "relative path") {
			t.Errorf("relative state directory: %v", err)
		}
	}

	dir := t.TempDir()
	pol := &policy.Policy{Roots: []string{root}, SpendStore: filepath.Join(dir, "spend.db"), Workspace: filepath.Join(dir, "ws"), Rate: policy.Rate{N: 1, Per: 1e9}}
	s, err := Open(pol, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Policy != pol || s.Gate.Policy != pol || s.Gate.Verifier == nil || s.Gate.Rates == nil || s.Delegations == nil || s.Gate.Ended == nil || s.Revocations != nil {
		t.Errorf("snapshot %+v, gate %+v", s, s.Gate)
	}
	if _, ok := s.Gate.Budget.(*budget.SQLite); !ok {
		t.Errorf("spend store %T, want the SQLite database", s.Gate.Budget)
	}
	s.Close()
	// Closed, the database's owner lock is free: another Open takes it.
	s, err = Open(pol, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// OpenAudit opens nothing without an audit log, refuses one without a key
// (a setting), names the flag a key came from when it cannot be read, and
// opens and closes a log signed with the key.
func TestOpenAudit(t *testing.T) {
	dir := t.TempDir()
	if l, closeLog, err := OpenAudit(&policy.Policy{}, AuditOptions{}); l != nil || err != nil || closeLog() != nil {
		t.Errorf("no audit log: %v %v", l, err)
	}
	pol := &policy.Policy{AuditLog: filepath.Join(dir, "audit.log")}
	var se *SettingError
	if _, _, err := OpenAudit(pol, AuditOptions{}); !errors.As(err, &se) || !strings.Contains(err.Error(), "needs a key") {
		t.Errorf("no key: %v", err)
	}
	var oe *StoreError
	if _, _, err := OpenAudit(pol, AuditOptions{Key: filepath.Join(dir, "none.key"), KeyFrom: "--key"}); !errors.As(err, &oe) || !strings.Contains(err.Error(), "fix --key") {
		t.Errorf("missing key: %v", err)
	}
	k, err := identity.Generate(rand.Reader, "proxy")
	if err != nil {
		t.Fatal(err)
	}
	pol.ProxyKey = filepath.Join(dir, "proxy.key")
	if err := identity.SaveKeyFile(pol.ProxyKey, k); err != nil {
		t.Fatal(err)
	}
	l, closeLog, err := OpenAudit(pol, AuditOptions{})
	if err != nil || l == nil {
		t.Fatalf("OpenAudit: %v %v", l, err)
	}
	if err := closeLog(); err != nil {
		t.Fatal(err)
	}
}
