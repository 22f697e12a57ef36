package gate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/revocation"
)

// Options are what the front opening a gate adds to its policy. The zero
// value is a proxy that logs nothing and whose settings all came from the
// policy file.
type Options struct {
	// Log is told what Open had to settle for (spend or rate-limit windows
	// kept in memory only, a spend log of an earlier version, …); nil
	// means zap.NewNop().
	Log *zap.Logger
	// Who names the front in messages ("the proxy", "the server"); ""
	// means "the proxy".
	Who string
	// RevocationListFrom and SpendStoreFrom name where the policy's
	// revocation_list and spend_store came from, for the messages that say
	// what to fix: a flag ("--revocations") when it replaced the key; ""
	// means the policy's key ("revocation_list in the policy").
	RevocationListFrom, SpendStoreFrom string
	// PolicyDigest is the hex SHA-256 of the policy file the policy was
	// read from, kept in the Snapshot for the receipts of its decisions;
	// "" for built-in defaults.
	PolicyDigest string
	// StateDir is where this machine keeps what it must remember of the
	// policy's Redis stores across restarts (a spend store's identity, a
	// durable copy of the revocation list and of the ended delegations);
	// "" keeps nothing, with a warning. The command line's is
	// DELEGATEOS_STATE_DIR, else the policy's state_dir, else
	// budget.StateDir.
	StateDir string
}

func (o *Options) defaults() {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Who == "" {
		o.Who = "the proxy"
	}
	if o.RevocationListFrom == "" {
		o.RevocationListFrom = "revocation_list in the policy"
	}
	if o.SpendStoreFrom == "" {
		o.SpendStoreFrom = "spend_store in the policy"
	}
}

// Snapshot is a gate as one policy sets it up: the Gate and every store,
// key and limiter behind it, opened once by Open. Its fields are not
// changed after Open, so every front (the stdio proxy, serve's sessions)
// decides with the same one; a reload makes a new Snapshot that shares
// the old one's stores and swaps it in (Current.Reload). A front sets the Gate's Observer
// and Accept hooks, if it has any, before its first decision.
type Snapshot struct {
	// Policy is the policy the snapshot was opened from; it is not changed.
	Policy *policy.Policy
	// Gate decides every gated request.
	Gate *Gate
	// Revocations is the live revocation list the Gate's Verifier
	// consults; nil when the policy names none.
	Revocations revocation.Live
	// Delegations answers the delegateos/ messages over the policy's
	// workspace, and tells the Gate which delegations have ended, wait for
	// others, or hold budget for their sub-tasks; nil without a workspace.
	Delegations *Delegations
	// PolicyDigest is Options.PolicyDigest: the policy file this snapshot
	// decides by, named in the receipts of its decisions.
	PolicyDigest string

	closers []func()
}

// Close releases what Open opened, in the reverse order.
func (s *Snapshot) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// A SettingError is a setting that cannot work as given (no trusted roots,
// roots that are not principal IDs, a Redis that would evict what it
// keeps): the message says what to change.
type SettingError struct{ msg string }

func (e *SettingError) Error() string { return e.msg }

// A StoreError is a store the policy names that cannot be opened (the
// revocation list, the spend store, the rate-limit windows, the
// workspace): the message says what to fix.
type StoreError struct{ msg string }

func (e *StoreError) Error() string { return e.msg }

func settingf(format string, args ...any) error {
	return &SettingError{msg: fmt.Sprintf(format, args...)}
}

func storef(format string, args ...any) error {
	return &StoreError{msg: fmt.Sprintf(format, args...)}
}

// Open builds the Gate a policy describes: the verifier over its roots and
// revocation list, the spend store, the rate limits and the workspace's
// delegations. The policy must not be changed afterwards. On an error
// nothing stays open.
func Open(pol *policy.Policy, opts Options) (_ *Snapshot, err error) {
	opts.defaults()
	log := opts.Log
	s := &Snapshot{Policy: pol, PolicyDigest: opts.PolicyDigest}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if len(pol.Roots) == 0 && !pol.AllowUnauthenticated {
		return nil, settingf("no trusted roots, so no token could ever be verified: give --root ID (the principal ID or did:key of the key that minted your tokens; 'delegateos id --key FILE' prints it) or list it under roots in the policy file")
	}
	s.Gate = &Gate{Policy: pol, HonourUpstreamCost: pol.HonourUpstreamCost}
	vopts := dct.Options{Roots: pol.Roots}
	if pol.RevocationList != "" {
		revs, err := openRevocations(pol, opts.StateDir)
		if err != nil {
			what := opts.RevocationListFrom
			if se := (*budget.StateError)(nil); errors.As(err, &se) {
				// The state directory's, whose message names its remedy.
				return nil, storef("the revocation list cannot be used: %v", err)
			}
			if errors.Is(err, os.ErrNotExist) {
				return nil, storef("the revocation list %s does not exist: create it (an empty list is [], and 'delegateos revoke --list %s' creates it with an entry), or fix %s", pol.RevocationList, pol.RevocationList, what)
			}
			if redisconn.IsURL(pol.RevocationList) {
				return nil, storef("the revocation list cannot be used: %v; start Redis there, fix the URL or remove the entry that does not verify (%s)", err, what)
			}
			return nil, storef("the revocation list %s cannot be used: %v; fix the file, or point %s at another", pol.RevocationList, err, what)
		}
		s.closers = append(s.closers, func() { revs.Close() })
		s.Revocations = revs
		vopts.Revocations = revs
	}
	if len(vopts.Roots) > 0 {
		if s.Gate.Verifier, err = dct.NewVerifier(vopts); err != nil {
			return nil, settingf("the trusted roots cannot be used: %v; fix --root or the roots in the policy file", err)
		}
	}
	spendFrom := opts.SpendStoreFrom
	if pol.SpendStore != "" {
		store, err := budget.Open(pol.SpendStore, opts.StateDir)
		if err != nil {
			if errors.Is(err, redisconn.ErrEviction) {
				return nil, settingf("%v (%s)", err, spendFrom)
			}
			if se := (*budget.StateError)(nil); errors.As(err, &se) {
				// The state directory's, whose message names its remedy.
				return nil, storef("the spend store cannot be opened: %v", err)
			}
			if redisconn.IsURL(pol.SpendStore) {
				return nil, storef("the spend store cannot be opened: %v; start Redis there or fix the URL (%s)", err, spendFrom)
			}
			return nil, storef("the spend store %s cannot be opened: %v; give a file %s can create and write (%s)", pol.SpendStore, err, opts.Who, spendFrom)
		}
		s.closers = append(s.closers, func() { store.Close() })
		if w, ok := store.(interface{ Warnings() []string }); ok {
			for _, msg := range w.Warnings() {
				log.Warn(msg)
			}
		}
		s.Gate.Budget = store
	} else {
		log.Warn("spend is kept in memory only and resets when " + opts.Who + " restarts; set spend_store in the policy or --spend-store to keep it")
		s.Gate.Budget = budget.NewMemory()
	}
	rates, closeRates, err := openRates(pol, spendFrom, log)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, closeRates)
	s.Gate.Rates = rates
	if pol.Workspace != "" && redisconn.IsURL(pol.EndedDelegations) {
		// The machine's durable copy of the ended-delegation set is kept
		// in the state directory: checked as for the spend store.
		if err := budget.StateDirError(); err != nil {
			return nil, storef("the ended-delegation set's copy cannot be kept: %v", err)
		}
		if err := budget.CheckStateDir(opts.StateDir); err != nil {
			return nil, storef("the ended-delegation set's copy cannot be kept: %v", err)
		}
	}
	delegations, closeDelegations, err := openDelegations(pol, s.Gate.Verifier, s.Revocations, s.Gate.Budget, opts.StateDir, log)
	if err != nil {
		return nil, storef("%v; fix workspace in the policy, or make the directory writable by %s's user", err, opts.Who)
	}
	s.closers = append(s.closers, closeDelegations)
	if delegations != nil {
		s.Gate.Ended = delegations.Ended
		s.Gate.Pending = delegations.Pending
		s.Gate.Hold = delegations.Hold
		s.Delegations = delegations
	}
	return s, nil
}

// openRevocations opens the policy's revocation list: with a Redis list,
// the proxy keeps durable copies of the list, in its workspace
// (revocations.json) if it has one, and in the machine's state directory
// (shared by the proxies of every workspace), restored to Redis if Redis
// loses entries: a revocation the fleet's Redis forgets while no proxy
// that knew it runs is written back by the next proxy of a machine that
// knew it.
func openRevocations(pol *policy.Policy, dir string) (revocation.Live, error) {
	if !redisconn.IsURL(pol.RevocationList) {
		return revocation.Open(pol.RevocationList)
	}
	if err := budget.StateDirError(); err != nil {
		return nil, &budget.StateError{Err: err}
	}
	if err := budget.CheckStateDir(dir); err != nil {
		return nil, &budget.StateError{Err: err}
	}
	var copies []string
	if pol.Workspace != "" {
		if err := os.MkdirAll(pol.Workspace, 0o755); err != nil {
			return nil, err
		}
		copies = append(copies, filepath.Join(pol.Workspace, WorkspaceRevocations))
	}
	if dir != "" {
		if err := budget.MakeStateDir(dir); err != nil {
			return nil, fmt.Errorf("the state directory %s, where the machine keeps a durable copy of the revocation list: %w; set DELEGATEOS_STATE_DIR to a directory the proxy can write", dir, err)
		}
		own := filepath.Join(dir, redisconn.CanonicalStateName(pol.RevocationList, ".revocations.json"))
		copies = append(copies, own)
		// The machine's copies of lists named another way (an alias, a
		// NAT address, which no canonical name links): a revocation is a
		// signed fact about its block, so holding another list's only
		// refuses more. Each copy is kept whole.
		others, err := fsutil.GlobIn(dir, "redis-*.revocations.json")
		if err != nil {
			return nil, fmt.Errorf("the state directory %s cannot be listed: %w", dir, err)
		}
		for _, o := range others {
			if o != own {
				copies = append(copies, o)
			}
		}
	}
	if len(copies) == 0 {
		return revocation.Open(pol.RevocationList)
	}
	r, err := revocation.OpenRedisCopy(pol.RevocationList, copies...)
	if err != nil {
		return nil, err
	}
	return r, nil
}
