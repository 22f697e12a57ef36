package main

import (
	"os"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/policy"
)

// warnUnwritable warns, at start, of each file the gate writes as it runs
// that it cannot write (gate.UnwritableFiles).
func warnUnwritable(pol *policy.Policy, log *zap.Logger) {
	for _, u := range gate.UnwritableFiles(pol) {
		log.Warn("a file the gate writes cannot be written: "+u.What+"; make it writable, or set state_dir in the policy to a writable directory",
			zap.String("path", u.Path), zap.Error(u.Err))
	}
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
