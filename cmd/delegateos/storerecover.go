package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/ratelimit"
	"github.com/delegateos/delegateos/receipt"
)

var storeRecoverCmd = &command{
	name:    "recover",
	args:    "--store URL --root ID --audit LOG... [--head LOG=DIGEST]... [--policy FILE] [--workspace DIR]... [--ended URL] [--key-id DID]... [--json]",
	summary: "rebuild the spend of a Redis spend store that lost data from the fleet's signed audit logs (and its ended delegations from their workspaces), and lift its store_reset state",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		store := fs.String("store", "", "the redis:// URL of the fleet's spend store")
		root := fs.String("root", "", "the principal ID (or did:key) that issued the delegation trees whose spend is rebuilt: the receipts name each call's delegations, not their issuer")
		logs := fs.StringArray("audit", nil, "an audit log of a proxy of the fleet (repeatable: give every proxy's, or the spend of the calls in the missing ones is not rebuilt)")
		heads := fs.StringArray("head", nil, "LOG=DIGEST: the head its proxy logged when it closed LOG (\"audit log closed\"), which the log must hold (repeatable): a log cut back past it is refused, and nothing is rebuilt")
		policyPath := fs.String("policy", "", "the fleet's policy file: the rate-limit windows of its rate: settings are rebuilt from the calls in the logs (without it they restart empty)")
		workspaces := fs.StringArray("workspace", nil, "a workspace of a proxy of the fleet (repeatable): the delegations its "+wsDelegations+" records ended (completed, failed, revoked) are recorded again in the ended-delegation set")
		ended := fs.String("ended", "", "the redis:// URL of the fleet's ended-delegation set (default: --store)")
		keyIDs := fs.StringArray("key-id", nil, "the did:key the entries must be signed by (repeatable; default: each log's first signer, for every entry of that log)")
		asJSON := fs.Bool("json", false, "print the result as JSON: {store, generation, delegations, receipts, unaccounted}")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if !redisconn.IsURL(*store) {
				return usagef("give the redis:// URL of the spend store (--store URL)")
			}
			if len(*logs) == 0 {
				return usagef("give the fleet's audit logs (--audit LOG, once per log)")
			}
			issuer, err := principal("--root", *root)
			if err != nil {
				return err
			}
			trusted, err := trustedKeys(*keyIDs)
			if err != nil {
				return err
			}
			rb := newRebuild(issuer)
			rb.heads = map[string]string{}
			for _, h := range *heads {
				path, digest, ok := strings.Cut(h, "=")
				if !ok || !slices.Contains(*logs, path) || len(digest) != 64 || strings.Trim(digest, "0123456789abcdef") != "" {
					return usagef("--head %q: give LOG=DIGEST, LOG one of the --audit logs and DIGEST the 64 lower-case hex digits its proxy logged as head", h)
				}
				rb.heads[path] = digest
			}
			if *policyPath != "" {
				pol, err := policy.Load(*policyPath)
				if err != nil {
					return policyLoadError(*policyPath, err)
				}
				rb.pol = pol
			}
			for _, path := range *logs {
				if err := rb.read(path, trusted); err != nil {
					return err
				}
			}
			var endedDs []chain.Delegation
			for _, ws := range *workspaces {
				ds, err := chain.Load(filepath.Join(ws, wsDelegations))
				if err != nil {
					return inputf("the workspace %s: %v", ws, err)
				}
				endedDs = append(endedDs, ds...)
			}
			endedURL := *ended
			if endedURL == "" {
				endedURL = *store
			}
			nEnded, err := chain.RepublishEnded(endedURL, endedDs)
			if err != nil {
				return inputf("%v", err)
			}
			nRates := 0
			if rb.pol != nil && len(rb.rates) > 0 {
				if nRates, err = ratelimit.RebuildRedis(*store, gate.RateLimits(rb.pol), rb.rates); err != nil {
					return inputf("%v", err)
				}
			}
			usage := rb.usage()
			id, err := budget.RecoverStore(*store, usage)
			if err != nil {
				return inputf("%v", err)
			}
			unaccounted := rb.unaccounted()
			if *asJSON {
				return writeJSON(e, struct {
					Store       string   `json:"store"`
					Generation  int64    `json:"generation"`
					Delegations int      `json:"delegations"`
					Receipts    int      `json:"receipts"`
					Ended       int      `json:"ended"`
					RateLogs    int      `json:"rate_logs"`
					Unaccounted []string `json:"unaccounted"`
				}{redactStore(*store), id.Gen, len(usage), rb.allowed, nEnded, nRates, unaccounted})
			}
			fmt.Fprintf(e.stdout, "rebuilt the spend of %d delegations of %s from %d allowed calls in %d audit logs; the store's generation is now %d and its proxies take calls again\n",
				len(usage), redactStore(*store), rb.allowed, len(*logs), id.Gen)
			if rb.pol != nil {
				fmt.Fprintf(e.stdout, "rebuilt %d rate-limit windows\n", nRates)
			}
			if len(*workspaces) > 0 {
				fmt.Fprintf(e.stdout, "recorded %d ended delegations of %d workspaces in the ended-delegation set\n", nEnded, len(*workspaces))
			}
			for _, u := range unaccounted {
				fmt.Fprintf(e.stdout, "not accounted for: %s\n", u)
			}
			return nil
		}
	},
}

// rebuild is the spend the audit logs show, per budget key.
type rebuild struct {
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
	// heads are the digests each log must hold (--head).
	heads map[string]string
}

func newRebuild(issuer string) *rebuild {
	return &rebuild{issuer: issuer, keys: map[string]*budget.Usage{}}
}

// read verifies the audit log at path (refusing it, and the whole
// recovery, if it does not verify) and adds the spend of its allowed
// calls: what the call's execution receipt says it was charged, or, for a
// call without one (in flight, or its proxy killed), what it reserved.
func (rb *rebuild) read(path string, trusted []string) error {
	f, err := os.Open(path)
	if err != nil {
		return inputError{err}
	}
	rep, err := audit.Verify(f, audit.VerifyOptions{Trusted: trusted, Open: true, Head: rb.heads[path], AllowRecovered: true})
	f.Close()
	if err != nil {
		return inputf("the audit log %s does not verify, so nothing was rebuilt: %v; check it with 'delegateos audit verify %s --open', and leave out a log that is not the fleet's", path, err, path)
	}
	if rep.Export {
		return inputf("%s is an export, not a proxy's audit log: give the logs the proxies write", path)
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
		return inputError{err}
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
		return inputf("the audit log %s: %v", path, err)
	}
	if unsigned > 0 {
		rb.notes = append(rb.notes, fmt.Sprintf("%s: its last %d entries are not signed yet (no checkpoint follows them; its proxy writes one within a second, or when it starts again): their calls are charged what they reserved, whatever their execution receipts say", path, unsigned))
	}
	for _, id := range order {
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
		at, _ := time.Parse(time.RFC3339Nano, b.DecidedAt)
		rb.count(b.DelegationPath, at)
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
func (rb *rebuild) count(path []string, at time.Time) {
	for _, u := range rb.levels(path) {
		rb.counted(u, at)
	}
}

// add charges cost to every level of a delegation path.
func (rb *rebuild) add(path []string, cost int64, at time.Time) {
	rb.allowed++
	for _, u := range rb.levels(path) {
		u.Committed = min(u.Committed+cost, 1<<63-1)
		rb.counted(u, at)
	}
}

// levels are the usage of every level of a delegation path, made as needed.
func (rb *rebuild) levels(path []string) []*budget.Usage {
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
func (rb *rebuild) counted(u *budget.Usage, at time.Time) {
	u.Calls++
	if at.After(u.LastCall) {
		u.LastCall = at
	}
}

// addRate records an allowed call's admission at the rate limits the
// policy counts it against, at every level of its path: the policy's
// rate, and that of the rule that maps it (a tool's by its name, a
// prompt's, a resource's URI).
func (rb *rebuild) addRate(b *receipt.DecisionBody, at time.Time) {
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

func (rb *rebuild) usage() []budget.Usage {
	out := make([]budget.Usage, 0, len(rb.keys))
	for _, u := range rb.keys {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b budget.Usage) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// unaccounted says what the logs could not tell.
func (rb *rebuild) unaccounted() []string {
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
