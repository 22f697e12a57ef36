package gate

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/budget"
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
