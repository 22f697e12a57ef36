package main

import (
	"errors"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/revocation"
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
}

// openedGate is the Gate every front decides with, and the stores behind
// it that the fronts pass on.
type openedGate struct {
	gate        *gate.Gate
	revocations revocation.Live
	delegations *gate.Delegations
}

// openGate builds the Gate of `proxy` and `serve` alike from a policy
// whose flags have been applied: the verifier over the policy's roots and
// revocation list, the spend store, the rate limits and the workspace's
// delegations. close releases them all, in the reverse order.
func openGate(pol *policy.Policy, f gateFlags, log *zap.Logger) (g *openedGate, close func(), err error) {
	var closers []func()
	close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			close()
		}
	}()
	if len(pol.Roots) == 0 && !pol.AllowUnauthenticated {
		return nil, close, fixf("no trusted roots, so no token could ever be verified: give --root ID (the principal ID or did:key of the key that minted your tokens; 'delegateos id --key FILE' prints it) or list it under roots in the policy file")
	}
	g = &openedGate{gate: &gate.Gate{Policy: pol, HonourUpstreamCost: pol.HonourUpstreamCost}}
	opts := dct.Options{Roots: pol.Roots}
	if pol.RevocationList != "" {
		revs, err := openRevocations(pol)
		if err != nil {
			what := settingFrom(f.revocations, "--revocations", "revocation_list")
			if errors.Is(err, os.ErrNotExist) {
				return nil, close, inputf("the revocation list %s does not exist: create it (an empty list is [], and 'delegateos revoke --list %s' creates it with an entry), or fix %s", pol.RevocationList, pol.RevocationList, what)
			}
			if redisconn.IsURL(pol.RevocationList) {
				return nil, close, inputf("the revocation list cannot be used: %v; start Redis there, fix the URL or remove the entry that does not verify (%s)", err, what)
			}
			return nil, close, inputf("the revocation list %s cannot be used: %v; fix the file, or point %s at another", pol.RevocationList, err, what)
		}
		closers = append(closers, func() { revs.Close() })
		g.revocations = revs
		opts.Revocations = revs
	}
	if len(opts.Roots) > 0 {
		if g.gate.Verifier, err = dct.NewVerifier(opts); err != nil {
			return nil, close, fixf("the trusted roots cannot be used: %v; fix --root or the roots in the policy file", err)
		}
	}
	spendFrom := settingFrom(f.spendStore, "--spend-store", "spend_store")
	if pol.SpendStore != "" {
		store, err := budget.Open(pol.SpendStore)
		if err != nil {
			if errors.Is(err, redisconn.ErrEviction) {
				return nil, close, fixf("%v (%s)", err, spendFrom)
			}
			if se := (*budget.StateError)(nil); errors.As(err, &se) {
				// The state directory's, whose message names its remedy.
				return nil, close, inputf("the spend store cannot be opened: %v", err)
			}
			if redisconn.IsURL(pol.SpendStore) {
				return nil, close, inputf("the spend store cannot be opened: %v; start Redis there or fix the URL (%s)", err, spendFrom)
			}
			return nil, close, inputf("the spend store %s cannot be opened: %v; give a file %s can create and write (%s)", pol.SpendStore, err, f.who, spendFrom)
		}
		closers = append(closers, func() { store.Close() })
		if w, ok := store.(interface{ Warnings() []string }); ok {
			for _, msg := range w.Warnings() {
				log.Warn(msg)
			}
		}
		g.gate.Budget = store
	} else {
		log.Warn("spend is kept in memory only and resets when " + f.who + " restarts; set spend_store in the policy or --spend-store to keep it")
		g.gate.Budget = budget.NewMemory()
	}
	rates, closeRates, err := openRates(pol, spendFrom, log)
	if err != nil {
		return nil, close, err
	}
	closers = append(closers, closeRates)
	g.gate.Rates = rates
	delegations, closeDelegations, err := openDelegations(pol, g.gate.Verifier, g.revocations, g.gate.Budget, log)
	if err != nil {
		return nil, close, inputf("%v; fix workspace in the policy, or make the directory writable by %s's user", err, f.who)
	}
	closers = append(closers, closeDelegations)
	if delegations != nil {
		g.gate.Ended = delegations.Ended
		g.gate.Pending = delegations.Pending
		g.gate.Hold = delegations.Hold
		g.delegations = delegations
	}
	return g, close, nil
}

// openRevocations opens the policy's revocation list: with a Redis list
// and a workspace, the proxy keeps a durable copy of the list in the
// workspace (revocations.json), restored to Redis if Redis loses entries.
func openRevocations(pol *policy.Policy) (revocation.Live, error) {
	if !redisconn.IsURL(pol.RevocationList) || pol.Workspace == "" {
		return revocation.Open(pol.RevocationList)
	}
	if err := os.MkdirAll(pol.Workspace, 0o755); err != nil {
		return nil, err
	}
	r, err := revocation.OpenRedisCopy(pol.RevocationList, filepath.Join(pol.Workspace, wsRevocations))
	if err != nil {
		return nil, err
	}
	return r, nil
}
