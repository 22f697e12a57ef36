package storerecover

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/ratelimit"
	"github.com/delegateos/delegateos/receipt"
)

// Rebuild is the spend the audit logs show, per budget key, and the
// admissions at each rate limit.
type Rebuild struct {
	issuer string
	keys   map[string]*budget.Usage
	// pol, when given, has the rate limits whose windows are rebuilt:
	// rates holds the times of the calls admitted at each key.
	pol     *policy.Policy
	rates   map[ratelimit.Key][]time.Time
	allowed int
	// charged are allowed calls with no execution receipt, charged what
	// they reserved; notes say what else could not be accounted for.
	charged int
	notes   []string
	// heads are the digests each log must hold.
	heads map[string]string
	// seen are the audit IDs of the calls an earlier log gave, with that
	// log: a call in two logs (the same log given twice, a copy, or two
	// logs forked from one) is counted once.
	seen map[string]string
}

// New returns an empty Rebuild of the delegation trees issuer (a
// principal ID) issued. pol, when not nil, is the fleet's policy, whose
// rate limits' windows are rebuilt too. heads are the digests of the
// heads the logs must hold, by path (see audit.VerifyOptions.Head): the
// heads their proxies logged when they closed them.
func New(issuer string, pol *policy.Policy, heads map[string]string) *Rebuild {
	return &Rebuild{issuer: issuer, keys: map[string]*budget.Usage{}, pol: pol, heads: heads, seen: map[string]string{}}
}

// UnverifiedError is a log that does not verify: nothing may be rebuilt.
type UnverifiedError struct {
	Path string
	Err  error
}

func (e *UnverifiedError) Error() string {
	return fmt.Sprintf("the audit log %s does not verify, so nothing was rebuilt: %v", e.Path, e.Err)
}

func (e *UnverifiedError) Unwrap() error { return e.Err }

// Read verifies the audit log at path (refusing it, and the whole
// recovery, if it does not verify) and adds the spend of its allowed
// calls: what the call's execution receipt says it was charged, or, for a
// call without one (in flight, or its proxy killed), what it reserved.
func (rb *Rebuild) Read(path string, trusted []string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	rep, err := audit.Verify(f, audit.VerifyOptions{Trusted: trusted, Open: true, Head: rb.heads[path], AllowRecovered: true})
	f.Close()
	if err != nil {
		return &UnverifiedError{Path: path, Err: err}
	}
	if rep.Export {
		return fmt.Errorf("%s is an export, not a proxy's audit log: give the logs the proxies write", path)
	}
	for _, r := range rep.Recovered {
		rb.notes = append(rb.notes, fmt.Sprintf("%s: %s", path, audit.RecoveryMsg(r.Entry)))
	}
	if !rep.Final && rb.heads[path] == "" {
		// Nothing in the log tells a cut-back log from one whose proxy
		// runs or was killed: the operator is told which logs to check.
		rb.notes = append(rb.notes, fmt.Sprintf("%s does not end with its final checkpoint (it ends at entry %d, %d entries after its last checkpoint): its proxy still runs, was killed, or the log was cut back; calls in entries removed from its end are not in the rebuilt spend; give the head its proxy logged at exit with --head %s=DIGEST to have a cut-back log refused", path, rep.Last, rep.Unsealed, path))
	}
	type decision struct {
		b    *receipt.DecisionBody
		cost int64
	}
	var order []string
	var unsigned int64
	decisions := map[string]*decision{}
	executed := map[string]int64{}
	released := map[string]bool{}
	var releasedOrder []*receipt.DecisionBody
	f, err = os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = audit.Read(f, func(_ int64, rc *receipt.Receipt) error {
		// Entries without a proof of their own are signed by the
		// checkpoint after them: those after the last one are not signed
		// yet, and anyone who can write the file could have appended
		// them. Their executions are not believed (one could lower what
		// a call is charged): their calls are charged what they reserved.
		unsealed := !rc.Signed() && rc.Position().Seq > rep.LastCheckpoint
		if unsealed {
			unsigned++
		}
		switch b := rc.Body.(type) {
		case *receipt.DecisionBody:
			switch {
			case len(b.DelegationPath) == 0:
			case b.Decision == receipt.DecisionAllow:
				if _, dup := decisions[b.AuditID]; !dup {
					order = append(order, b.AuditID)
					decisions[b.AuditID] = &decision{b: b, cost: b.CostReserved}
				}
			case reservedThenReleased(b):
				if !released[b.AuditID] {
					released[b.AuditID] = true
					releasedOrder = append(releasedOrder, b)
				}
			}
		case *receipt.ExecutionBody:
			if !unsealed {
				executed[b.GateAuditID] = b.CostCommitted
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the audit log %s: %w", path, err)
	}
	if unsigned > 0 {
		rb.notes = append(rb.notes, fmt.Sprintf("%s: its last %d entries are not signed yet (no checkpoint follows them; its proxy writes one within a second, or when it starts again): their calls are charged what they reserved, whatever their execution receipts say", path, unsigned))
	}
	// Calls an earlier log gave are counted there only.
	dups := map[string]int{}
	for _, id := range order {
		if first, dup := rb.seen[id]; dup {
			dups[first]++
			continue
		}
		rb.seen[id] = path
		d := decisions[id]
		cost, ok := executed[id]
		if !ok {
			cost = d.b.CostReserved
			rb.charged++
		}
		at, _ := time.Parse(time.RFC3339Nano, d.b.DecidedAt)
		rb.add(d.b.DelegationPath, cost, at)
		rb.addRate(d.b, at)
	}
	for _, b := range releasedOrder {
		if first, dup := rb.seen["released "+b.AuditID]; dup {
			dups[first]++
			continue
		}
		rb.seen["released "+b.AuditID] = path
		at, _ := time.Parse(time.RFC3339Nano, b.DecidedAt)
		rb.count(b.DelegationPath, at)
	}
	firsts := make([]string, 0, len(dups))
	for first := range dups {
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)
	for _, first := range firsts {
		rb.notes = append(rb.notes, fmt.Sprintf("%s repeats %d calls of %s (the same log given twice, a copy of it, or two logs forked from one): each is counted once", path, dups[first], first))
	}
	return nil
}

// reservedThenReleased reports whether a decision receipt that is not an
// allowed call's still stands for a reservation the gate made and gave
// back: a call held for approval is decided (and reserved, which counts
// it at every level of its path) before it is held, so its refusal
// (declined, timed out, unanswered: a BLOCK naming its approval) and the
// answer that waits for an approval (MCP 2026-07-28: WAITING, the retry
// is decided afresh) each stand for one counted call that charged nothing.
// The rebuild counts them, or a recovery from every log would count fewer
// calls than the proxies saw and be refused for ever.
func reservedThenReleased(b *receipt.DecisionBody) bool {
	return b.Decision == receipt.DecisionWaiting || b.Decision == receipt.DecisionBlock && b.ApprovalID != ""
}

// count counts a call at every level of its path without charging it.
func (rb *Rebuild) count(path []string, at time.Time) {
	for _, u := range rb.levels(path) {
		rb.counted(u, at)
	}
}

// add charges cost to every level of a delegation path.
func (rb *Rebuild) add(path []string, cost int64, at time.Time) {
	rb.allowed++
	for _, u := range rb.levels(path) {
		u.Committed = min(u.Committed+cost, 1<<63-1)
		rb.counted(u, at)
	}
}

// levels are the usage of every level of a delegation path, made as needed.
func (rb *Rebuild) levels(path []string) []*budget.Usage {
	out := make([]*budget.Usage, 0, min(len(path), budget.MaxLevels))
	key := rb.issuer
	for i, id := range path {
		if i == budget.MaxLevels {
			break
		}
		key += "/" + strconv.Itoa(len(id)) + ":" + id
		u := rb.keys[key]
		if u == nil {
			u = &budget.Usage{Key: key, Recorded: true}
			rb.keys[key] = u
		}
		out = append(out, u)
	}
	return out
}

// counted counts one call made at at.
func (rb *Rebuild) counted(u *budget.Usage, at time.Time) {
	u.Calls++
	if at.After(u.LastCall) {
		u.LastCall = at
	}
}

// addRate records an allowed call's admission at the rate limits the
// policy counts it against, at every level of its path: the policy's
// rate, and that of the rule that maps it (a tool's by its name, a
// prompt's, a resource's URI).
func (rb *Rebuild) addRate(b *receipt.DecisionBody, at time.Time) {
	if rb.pol == nil || at.IsZero() {
		return
	}
	var names []string
	if !rb.pol.Rate.IsZero() {
		names = append(names, gate.PolicyRateLimit)
	}
	var rules []policy.Rule
	var prefix string
	var call policy.Call
	switch b.Method {
	case gate.MethodToolsCall:
		call, _ = rb.pol.Map(b.Resource, nil)
		rules, prefix = rb.pol.Tools, "tools:"
	case gate.MethodPromptsGet:
		call, _ = rb.pol.MapPrompt(b.Resource, nil)
		rules, prefix = rb.pol.Prompts, "prompts:"
	case gate.MethodResourcesRead:
		call, _ = rb.pol.MapResource(b.Resource)
		rules, prefix = rb.pol.Resources, "resources:"
	default:
		call.Rule = -1
	}
	if call.Rule >= 0 && call.Rule < len(rules) && !rules[call.Rule].Rate.IsZero() {
		names = append(names, prefix+rules[call.Rule].Match)
	}
	if len(names) == 0 {
		return
	}
	if rb.rates == nil {
		rb.rates = map[ratelimit.Key][]time.Time{}
	}
	key := rb.issuer
	for i, id := range b.DelegationPath {
		if i == budget.MaxLevels {
			break
		}
		key += "/" + strconv.Itoa(len(id)) + ":" + id
		for _, n := range names {
			k := ratelimit.Key{Limit: n, Level: key}
			rb.rates[k] = append(rb.rates[k], at)
		}
	}
}

// Usage is the rebuilt spend, by budget key in ascending order.
func (rb *Rebuild) Usage() []budget.Usage {
	out := make([]budget.Usage, 0, len(rb.keys))
	for _, u := range rb.keys {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b budget.Usage) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Unaccounted says what the logs could not tell.
func (rb *Rebuild) Unaccounted() []string {
	out := slices.Clone(rb.notes)
	if rb.charged > 0 {
		out = append(out, fmt.Sprintf("%d allowed calls have no execution receipt (in flight, or their proxy was killed): each is charged what it reserved", rb.charged))
	}
	out = append(out,
		"calls of proxies whose audit logs were not given, and calls before the logs' first entries, are not in the rebuilt spend: a proxy that saw a tree count more calls than the rebuild refuses it (store_reset) until store recover is run again with its log too",
		"delegations ended at proxies whose workspaces were not given (--workspace) are not recorded ended again")
	if rb.pol == nil {
		out = append(out, "rate-limit windows are not rebuilt without --policy: they restart empty (at most one window's calls more, each still within its budget)")
	} else {
		out = append(out, "a subscriptions/listen's rate-limit slots are not rebuilt")
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// Allowed is the number of allowed calls read.
func (rb *Rebuild) Allowed() int { return rb.allowed }

// Rates are the times of the calls admitted at each rate limit and level,
// nil without a policy (or with no rate limits in it).
func (rb *Rebuild) Rates() map[ratelimit.Key][]time.Time { return rb.rates }
