package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/policy"
)

// warnUnwritable warns, at start, of each file the gate writes as it runs
// that it cannot write: a revocation list that takes pushed revocations,
// a workspace whose delegations are recorded. (The spend store, the audit
// log and the log file are opened for writing at start, which refuses to
// start when they cannot be.) Under systemd's ProtectSystem the policy's
// directory is read-only: state_dir in the policy moves these files.
func warnUnwritable(pol *policy.Policy, log *zap.Logger) {
	for _, c := range []struct{ path, what string }{
		{pol.RevocationList, "revocation_list: revocations pushed to it (delegateos/revoke, POST /.well-known/delegateos/revocations) will be refused"},
		{pol.Workspace, "workspace: delegations, contracts and attestations cannot be recorded in it"},
	} {
		if c.path == "" || redisconn.IsURL(c.path) {
			continue
		}
		if err := writable(c.path); err != nil {
			log.Warn("a file the gate writes cannot be written: "+c.what+"; make it writable, or set state_dir in the policy to a writable directory",
				zap.String("path", c.path), zap.Error(err))
		}
	}
}

// writable reports why path (a file, or a directory if dir) cannot be
// written by this process: the file or directory if it exists, else the
// directory it would be created in.
func writable(path string) error {
	target := path
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		target = filepath.Dir(path)
	}
	return accessWrite(target)
}

// stateDirForStores is the directory where what is kept about the
// policy's Redis stores goes (gate.Options.StateDir): DELEGATEOS_STATE_DIR,
// else the policy's state_dir, else budget.StateDir's default.
func stateDirForStores(pol *policy.Policy) string {
	if pol.StateDir != "" && os.Getenv("DELEGATEOS_STATE_DIR") == "" {
		return pol.StateDir
	}
	return budget.StateDir()
}
