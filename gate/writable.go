package gate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/policy"
)

// An Unwritable is a file the gate writes as it runs that this process
// cannot write.
type Unwritable struct {
	// Path is the file; What is its policy key and what fails because of
	// it; Err says why it cannot be written.
	Path, What string
	Err        error
}

// UnwritableFiles lists, at start, each file the gate writes as it runs
// that it cannot write: a revocation list that takes pushed revocations,
// a workspace whose delegations are recorded. (The spend store, the audit
// log and the log file are opened for writing at start, which refuses to
// start when they cannot be.) Under systemd's ProtectSystem the policy's
// directory is read-only: state_dir in the policy moves these files.
func UnwritableFiles(pol *policy.Policy) []Unwritable {
	var out []Unwritable
	for _, c := range []struct{ path, what string }{
		{pol.RevocationList, "revocation_list: revocations pushed to it (delegateos/revoke, POST /.well-known/delegateos/revocations) will be refused"},
		{pol.Workspace, "workspace: delegations, contracts and attestations cannot be recorded in it"},
	} {
		if c.path == "" || redisconn.IsURL(c.path) {
			continue
		}
		if err := writable(c.path); err != nil {
			out = append(out, Unwritable{Path: c.path, What: c.what, Err: err})
		}
	}
	return out
}

// writable reports why path (a file, or a directory) cannot be written by
// this process: the file or directory if it exists, else the directory it
// would be created in.
func writable(path string) error {
	target := path
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		target = filepath.Dir(path)
	}
	return accessWrite(target)
}
