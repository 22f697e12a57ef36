package gate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/ratelimit"
)

// PolicyRateLimit is the name of the policy's own rate limit in
// RateLimits; a rule's is its map and its match, e.g. "tools:write_*".
const PolicyRateLimit = "policy"

// noTokenLevel is the one level at which the requests that carry no token
// (allow_unauthenticated) are limited, together. No delegation path can
// take this form: each begins with an issuer's principal ID.
const noTokenLevel = "(no token)"

var noTokenLevels = []budget.Level{{Key: noTokenLevel}}

// The maps a rule can be in, as indexes of rateState.names.
const (
	toolMap = iota
	resourceMap
	promptMap
	maps
)

var mapNames = [maps]string{toolMap: "tools", resourceMap: "resources", promptMap: "prompts"}

// RateLimits returns the rate limits the policy sets, by their names: the
// policy's rate under PolicyRateLimit, and each rule's under its map and
// its match ("tools:write_*", "resources:file:///srv/**",
// "prompts:review-*"). Matches are unique within a map, so a rule keeps
// its name, and its windows in a rate-limit file, when other rules are
// added or moved.
func RateLimits(p *policy.Policy) map[string]ratelimit.Limit {
	limits := map[string]ratelimit.Limit{}
	if !p.Rate.IsZero() {
		limits[PolicyRateLimit] = ratelimit.Limit{N: p.Rate.N, Per: p.Rate.Per}
	}
	for m, rules := range policyMaps(p) {
		for _, r := range rules {
			if !r.Rate.IsZero() {
				limits[mapNames[m]+":"+r.Match] = ratelimit.Limit{N: r.Rate.N, Per: r.Rate.Per}
			}
		}
	}
	return limits
}

func policyMaps(p *policy.Policy) [maps][]policy.Rule {
	return [maps][]policy.Rule{toolMap: p.Tools, resourceMap: p.Resources, promptMap: p.Prompts}
}

// rateState is what the gate derives from the policy's rate limits at its
// first decision.
type rateState struct {
	once    sync.Once
	limited bool // the policy sets a rate limit
	limiter ratelimit.Store
	err     error // why there is no limiter
	// names are the limit names of each map's rules, "" for a rule
	// without a rate.
	names [maps][]string
	keys  keysMemo
}

// keysMemo remembers the keys of the last call the gate limited: a
// session's calls mostly carry one token and call a few tools, so their
// keys are built once rather than per call. A hit is the same levels
// slice (levelsMemo hands out one per chain, and the memo keeps it alive,
// so its address is not reused) and the same limit names. The keys it
// returns are shared: the limiter only reads them.
type keysMemo struct{ last atomic.Pointer[memoKeys] }

type memoKeys struct {
	levels []budget.Level
	names  []string
	keys   []ratelimit.Key
}

func (m *keysMemo) of(names []string, levels []budget.Level) []ratelimit.Key {
	if e := m.last.Load(); e != nil && len(levels) > 0 && len(e.levels) == len(levels) && &e.levels[0] == &levels[0] && slices.Equal(e.names, names) {
		return e.keys
	}
	keys := make([]ratelimit.Key, 0, len(names)*len(levels))
	for _, n := range names {
		for _, l := range levels {
			keys = append(keys, ratelimit.Key{Limit: n, Level: l.Key})
		}
	}
	m.last.Store(&memoKeys{levels: levels, names: slices.Clone(names), keys: keys})
	return keys
}

func (g *Gate) rateLimits() *rateState {
	s := &g.limits
	s.once.Do(func() {
		limits := RateLimits(g.Policy)
		if len(limits) == 0 {
			return
		}
		s.limited = true
		for m, rules := range policyMaps(g.Policy) {
			s.names[m] = make([]string, len(rules))
			for i, r := range rules {
				if !r.Rate.IsZero() {
					s.names[m][i] = mapNames[m] + ":" + r.Match
				}
			}
		}
		s.limiter = g.Rates
		if s.limiter == nil {
			l, err := ratelimit.New(limits)
			if err != nil {
				s.err = err
				return
			}
			s.limiter = l
		}
	})
	return s
}

// ruleMap is the map whose rules decide req.
func ruleMap(req *CallRequest) int {
	switch req.Method {
	case "", MethodToolsCall:
		return toolMap
	case MethodPromptsGet:
		return promptMap
	case MethodCompletionComplete:
		if req.Prompt != "" {
			return promptMap
		}
	}
	return resourceMap
}

// reserveRate admits req at the rate limits it counts against, at every
// level of its chain (levels; nil for a request without a token): the
// policy's, and that of the rule that maps it, or, for a
// subscriptions/listen, of each distinct rule that maps one of its URIs.
// It refuses with a RateLimited denial when any of them is reached.
func (g *Gate) reserveRate(req *CallRequest, call policy.Call, scope *dct.AuthorizedScope, levels []budget.Level, now time.Time) (ratelimit.Admission, *Denial) {
	s := g.rateLimits()
	if !s.limited {
		return ratelimit.Admission{}, nil
	}
	var small [4]string
	names := small[:0]
	if !g.Policy.Rate.IsZero() {
		names = append(names, PolicyRateLimit)
	}
	m := ruleMap(req)
	if len(req.URIs) == 0 {
		names = appendRuleLimit(names, s.names[m], call)
	} else {
		sub := *req
		for _, uri := range req.URIs {
			sub.URI = uri
			c, _ := g.mapRequest(&sub)
			names = appendRuleLimit(names, s.names[m], c)
		}
	}
	if len(names) == 0 {
		return ratelimit.Admission{}, nil
	}
	if scope == nil {
		levels = noTokenLevels
	}
	keys := s.keys.of(names, levels)
	denial := func(detail string, retry int64) *Denial {
		d := &Denial{Type: RateLimited, Detail: detail, Requested: Requested(call), RetryAfterMs: retry}
		if scope != nil {
			d.Granted = scope.Capabilities
		}
		return d
	}
	if s.limiter == nil {
		return ratelimit.Admission{}, denial(fmt.Sprintf("the policy's rate limits cannot be enforced: %v", s.err), 0)
	}
	a, err := s.limiter.Reserve(keys, now)
	if lim, ok := err.(*ratelimit.LimitedError); ok {
		// Rounded up, so that a client that waits as long is admitted.
		wait := (lim.RetryAfter + time.Millisecond - 1).Truncate(time.Millisecond)
		return ratelimit.Admission{}, denial(limitedDetail(lim, scope, levels, wait), max(wait.Milliseconds(), 1))
	}
	if err != nil {
		// A rate-limit store in Redis that does not answer: the call is
		// refused, as when the spend store does not.
		var granted []dct.Capability
		if scope != nil {
			granted = scope.Capabilities
		}
		return ratelimit.Admission{}, storeFailure(err, Requested(call), granted)
	}
	return a, nil
}

// appendRuleLimit appends the name of the limit of the rule that decided
// call, unless it has none or names holds it.
func appendRuleLimit(names, ruleNames []string, call policy.Call) []string {
	if call.Rule < 0 || call.Rule >= len(ruleNames) || ruleNames[call.Rule] == "" {
		return names
	}
	n := ruleNames[call.Rule]
	for _, have := range names {
		if have == n {
			return names
		}
	}
	return append(names, n)
}

// limitedDetail says which limit refused a call, at which delegation, and
// when to try again.
func limitedDetail(lim *ratelimit.LimitedError, scope *dct.AuthorizedScope, levels []budget.Level, wait time.Duration) string {
	who := "requests without a token have"
	if scope != nil {
		who = "delegation " + render.Name(displayKey(scope, levels, lim.Key.Level)) + " has"
	}
	rate := policy.Rate{N: lim.Limit.N, Per: lim.Limit.Per}
	what := "the policy's rate: " + rate.String()
	if m, match, ok := strings.Cut(lim.Key.Limit, ":"); ok {
		what = fmt.Sprintf("the rate of the %s rule that matches %s: %s", m, render.Name(match), rate)
	}
	calls := "calls"
	if rate.N == 1 {
		calls = "call"
	}
	per := strings.TrimPrefix(rate.String(), strconv.Itoa(rate.N)+"/")
	return fmt.Sprintf("%s made %d %s in the last %s, %s; retry after %s", who, rate.N, calls, per, what, wait)
}

// releaseRate gives back a's slots: the call it admitted is not forwarded.
// A release the rate-limit file cannot record still counts in this
// process; one Redis does not answer leaves the slots taken until they
// leave their windows.
func (g *Gate) releaseRate(a ratelimit.Admission) {
	if s := g.rateLimits(); s.limiter != nil {
		_ = s.limiter.Release(a)
	}
}

// ReleaseUnforwarded gives back the rate-limit slots of an allowed call
// that is not forwarded: a 2026-07-28 client's call answered with the
// proxy's input_required, whose retry is decided (and counted) afresh.
func (g *Gate) ReleaseUnforwarded(d *Decision) {
	if d == nil {
		return
	}
	a := d.rate // a zero Admission releases nothing
	d.rate = ratelimit.Admission{}
	g.releaseRate(a)
}
