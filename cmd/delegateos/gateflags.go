package main

import (
	"errors"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/policy"
)

// settingFrom names where a setting came from, for the messages that say
// what to fix: the flag when it was given, else the policy's key.
func settingFrom(flagSet bool, flag, key string) string {
	if flagSet {
		return flag
	}
	return key + " in the policy"
}

// applyGateFlags checks the policy's pins and applies the flags proxy and
// serve share over the policy: --root (added to its roots), --log,
// --revocations and --spend-store (each replacing its key when given).
func applyGateFlags(pol *policy.Policy, policyPath string, roots []string, logFile, revocations, spendStore string) error {
	if err := checkPins(pol.ToolPins, policyPath); err != nil {
		return err
	}
	for _, r := range roots {
		id, err := principal("--root", r)
		if err != nil {
			return err
		}
		pol.Roots = append(pol.Roots, id)
	}
	for _, f := range []struct {
		flag string
		key  *string
	}{{logFile, &pol.Log.File}, {revocations, &pol.RevocationList}, {spendStore, &pol.SpendStore}} {
		if f.flag != "" {
			*f.key = f.flag
		}
	}
	return nil
}

// gateFlags says which of the gate's settings a command's flags gave, and
// what the command is called in messages ("the proxy", "the server").
type gateFlags struct {
	revocations, spendStore bool
	who                     string
	// policyDigest is the policy file's SHA-256, "" for built-in defaults.
	policyDigest string
	// stateDir is gate.Options.StateDir (stateDirForStores).
	stateDir string
}

// options are the gate.Options of f.
func (f gateFlags) options(log *zap.Logger) gate.Options {
	return gate.Options{
		Log: log, Who: f.who, PolicyDigest: f.policyDigest, StateDir: f.stateDir,
		RevocationListFrom: settingFrom(f.revocations, "--revocations", "revocation_list"),
		SpendStoreFrom:     settingFrom(f.spendStore, "--spend-store", "spend_store"),
	}
}

// openGate opens the gate of `proxy` and `serve` alike (gate.Open) from a
// policy whose flags have been applied, and turns its errors into the
// CLI's: a setting to change is a usage error, a store that cannot be
// opened an input error.
func openGate(pol *policy.Policy, f gateFlags, log *zap.Logger) (*gate.Snapshot, error) {
	if f.stateDir == "" && budget.StateDirError() == nil {
		// A fleet's store with nowhere to keep what the machine saw: a
		// proxy restarted after Redis went back to an older snapshot
		// would spend the budget again (red team 7, RT7-3). Refused as an
		// unsafe state directory is.
		for _, u := range []string{pol.SpendStore, pol.RevocationList, pol.EndedDelegations} {
			if redisconn.IsURL(u) {
				return nil, inputf("%s cannot remember what it saw of the store %s: there is no state directory (neither DELEGATEOS_STATE_DIR, XDG_STATE_HOME nor a home directory is set), and a proxy restarted after the store lost data, or went back to an older snapshot, would not notice it; set DELEGATEOS_STATE_DIR (or HOME) to a directory of this user's", f.who, redisconn.Redact(u))
			}
		}
	}
	snap, err := gate.Open(pol, f.options(log))
	var se *gate.SettingError
	var oe *gate.StoreError
	switch {
	case errors.As(err, &se):
		return nil, fixf("%s", se.Error())
	case errors.As(err, &oe):
		return nil, inputf("%s", oe.Error())
	case err != nil:
		return nil, err
	}
	return snap, nil
}
