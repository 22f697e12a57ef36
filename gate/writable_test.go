package gate

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/policy"
)

// A file the gate writes in a directory that cannot be written (here one
// that does not exist) is listed with its key; a writable workspace and a
// Redis list are not.
func TestUnwritableFiles(t *testing.T) {
	dir := t.TempDir()
	revs := filepath.Join(dir, "missing", "revocations.json")
	got := UnwritableFiles(&policy.Policy{RevocationList: revs, Workspace: dir})
	if len(got) != 1 || got[0].Path != revs || !strings.HasPrefix(got[0].What, "revocation_list: ") || got[0].Err == nil {
		t.Fatalf("got %+v", got)
	}
	if got := UnwritableFiles(&policy.Policy{RevocationList: "redis://127.0.0.1:1/0", Workspace: dir}); len(got) != 0 {
		t.Fatalf("got %+v", got)
	}
}
