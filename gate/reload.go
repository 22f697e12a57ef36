package gate

import (
	"fmt"
	stdmaps "maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/policy"
)

// Current is the snapshot a front decides with now. Every front reads it
// once per request (Load) and keeps what it read for that request's whole
// life, so a call in flight settles against the snapshot that decided it;
// Reload swaps in a new one for the requests that follow. The zero value
// is not usable: make one with NewCurrent.
type Current struct {
	mu sync.Mutex // serializes Reload and Close
	p  atomic.Pointer[Snapshot]
}

// NewCurrent holds s as the current snapshot.
func NewCurrent(s *Snapshot) *Current {
	c := &Current{}
	c.p.Store(s)
	return c
}

// Load returns the current snapshot.
func (c *Current) Load() *Snapshot { return c.p.Load() }

// Reload makes a snapshot of pol that keeps every store, key and limiter
// of the current one (see reopen) and swaps it in. When pol cannot be
// applied live it returns a *ReloadError and the current snapshot stays
// as it was: a reload is applied whole or not at all. commit, when not
// nil, is called with the new snapshot before it is swapped in (to record
// it first in the audit log, so that no decision it makes is written
// before the record); its error refuses the reload too. Two reloads at
// once are applied one after the other.
func (c *Current) Reload(pol *policy.Policy, opts Options, commit func(*Snapshot) error) (*Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.p.Load()
	s, err := reopen(old, pol, opts)
	if err != nil {
		return nil, err
	}
	if commit != nil {
		if err := commit(s); err != nil {
			return nil, err
		}
	}
	// The new snapshot owns the stores now: the old one's Close releases
	// nothing, and a call it decided still settles in the same stores.
	s.closers, old.closers = old.closers, nil
	if s.Delegations != nil && s.Gate.Verifier != old.Gate.Verifier {
		// The workspace's delegation messages verify with the new roots.
		s.Delegations.reloaded.Store(&reloadedVerifier{s.Gate.Verifier})
	}
	c.p.Store(s)
	return s, nil
}

// Close closes the current snapshot, which owns every store the snapshots
// before it shared.
func (c *Current) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.p.Load().Close()
}

// A ReloadError is a policy that cannot replace the current one live: a
// setting that names a store, a key or a bound fixed when the front
// started changed, or a store the policy names cannot be read now. The
// message says what and what to do.
type ReloadError struct{ msg string }

func (e *ReloadError) Error() string { return e.msg }

func reloadf(format string, args ...any) error {
	return &ReloadError{msg: fmt.Sprintf(format, args...)}
}

// reopen returns the snapshot of pol that replaces old: a new Gate over
// pol's maps, costs and roots, and old's stores, shared rather than
// opened again — the spend store (so reservations made under old settle
// in the same store and budgets carry over exactly), the rate-limit
// windows (memory included), the revocation list, read again now, and the
// workspace's delegations. Reload then moves what old owns to it. The
// front's hooks (Observer, Accept, Now) are carried over.
//
// A change reopen cannot apply live — where a store is kept, what it
// keeps (the rate limits), the audit log, the proxy key, the log, the
// frame bound — is refused with a *ReloadError; so is a revocation list
// that cannot be read now. Nothing is changed then.
func reopen(old *Snapshot, pol *policy.Policy, opts Options) (*Snapshot, error) {
	opts.defaults()
	if err := fixedSettings(old.Policy, pol); err != nil {
		return nil, err
	}
	if len(pol.Roots) == 0 && !pol.AllowUnauthenticated {
		return nil, reloadf("the new policy has no trusted roots, so no token could ever be verified: list them under roots")
	}
	if old.Revocations != nil {
		if err := old.Revocations.Reload(); err != nil {
			return nil, reloadf("the revocation list %s cannot be read now: %v; the policy in force is kept (fix the list and reload again)", pol.RevocationList, err)
		}
	}
	og := old.Gate
	g := &Gate{
		Policy: pol, Verifier: og.Verifier, Budget: og.Budget, Now: og.Now,
		Ended: og.Ended, Pending: og.Pending, Hold: og.Hold, Accept: og.Accept,
		HonourUpstreamCost: pol.HonourUpstreamCost, Observer: og.Observer,
		Rates: og.Rates,
	}
	if g.Rates == nil {
		// The windows kept in memory, by the old gate: the same limiter,
		// so a reload never starts a window afresh.
		if s := og.rateLimits(); s.limiter != nil {
			g.Rates = s.limiter
		}
	}
	if !slices.Equal(old.Policy.Roots, pol.Roots) {
		g.Verifier = nil
		if len(pol.Roots) > 0 {
			vopts := dct.Options{Roots: pol.Roots}
			if old.Revocations != nil {
				vopts.Revocations = old.Revocations
			}
			v, err := dct.NewVerifier(vopts)
			if err != nil {
				return nil, reloadf("the trusted roots cannot be used: %v; fix the roots in the policy file", err)
			}
			g.Verifier = v
		}
	}
	s := &Snapshot{
		Policy: pol, Gate: g, Revocations: old.Revocations, Delegations: old.Delegations,
		PolicyDigest: opts.PolicyDigest,
	}
	return s, nil
}

// liveSettings are the fields of policy.Policy a reload applies: every
// other exported field names a store, a key or a bound the front set up
// at start, and must not change. A field added to the policy is fixed
// until it is listed here: a reload never half-applies a setting nobody
// taught it. Rate and the rules' rates are checked apart (RateLimits).
var liveSettings = map[string]bool{
	"Roots": true, "Tools": true, "Resources": true, "Prompts": true, "Methods": true,
	"DefaultCost": true, "HonourUpstreamCost": true, "Rate": true,
}

// fixedSettings refuses a policy whose settings differ from old's where a
// running front cannot follow them, naming the first by its key.
func fixedSettings(old, pol *policy.Policy) error {
	restart := "; the policy in force is kept: change it back, or restart to apply it"
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(pol).Elem()
	for i := range ov.NumField() {
		f := ov.Type().Field(i)
		if !f.IsExported() || liveSettings[f.Name] {
			continue
		}
		if !reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			return reloadf("%s changed, and it cannot change while running%s", policyKey(f.Name), restart)
		}
	}
	if !stdmaps.Equal(RateLimits(old), RateLimits(pol)) {
		return reloadf("the rate limits changed, and their windows are kept as they were opened%s", restart)
	}
	return nil
}

// policyKey is the policy file's key of a Policy field: SpendStore is
// spend_store, LDP ldp.
func policyKey(field string) string {
	var b strings.Builder
	for i, r := range field {
		if i > 0 && unicode.IsUpper(r) && unicode.IsLower(rune(field[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
