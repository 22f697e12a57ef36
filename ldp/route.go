package ldp

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/identity"
)

// Card metadata a DelegateOS delegate publishes (and a router reads).
const (
	// MetaDID is the delegate's did:key: the key that signs its replies.
	MetaDID = "delegateos.did"
	// MetaRevocation is its DelegateOS revocation endpoint.
	MetaRevocation = "delegateos.revocation_endpoint"
	// MetaCostPrefix + skill is what a task of that skill costs, in
	// microcents (a decimal integer).
	MetaCostPrefix = "delegateos.cost."
	// MetaQualityPrefix + skill says where the skill's quality_hint comes
	// from: "rdp (confidence C, N signals)" for the delegate's RDP profile
	// in its operator's workspace, "none" when it states none.
	MetaQualityPrefix = "delegateos.quality_source."
	// MetaCapabilityPrefix + skill is the DelegateOS capability
	// (namespace:action:resource) a task of that skill is authorised
	// against: the capability an initiator narrows its token to.
	MetaCapabilityPrefix = "delegateos.capability."
)

// TokenFormat is the format of a DelegateOS token in a delegateos member.
const TokenFormat = "delegateos-sjt-v1"

// MicrocentsPerUSD converts the reference's cost_per_call_usd.
const MicrocentsPerUSD = 100_000_000

// Reputation is what a router knows of a delegate: its RDP score in a
// domain (the skill) with the score's confidence, or ok false when no
// signal backs one.
type Reputation func(did, skill string) (score, confidence float64, samples int, ok bool)

// RouteRequest is what a router is asked to choose for.
type RouteRequest struct {
	Skill string
	// Budget is the most the task may cost, in microcents; 0 means no
	// limit. A delegate whose cost for the skill is unknown is excluded
	// when there is a limit.
	Budget int64
	// TrustDomain is the router's own domain; RequiredDomain, when set,
	// the domain the delegate must be in (§7.2 rule 1).
	TrustDomain, RequiredDomain string
	// Reputation looks delegates up; nil means none is known.
	Reputation Reputation
}

// Candidate is one delegate as the router weighed it.
type Candidate struct {
	URL  string        `json:"url"`
	Card *IdentityCard `json:"-"`
	// DelegateID and DID are the card's claims; the DID is proven only
	// when the delegate signs its replies with it (ldp submit checks).
	DelegateID string `json:"delegate_id,omitempty"`
	DID        string `json:"did,omitempty"`
	// Excluded says why the delegate cannot take the task; empty for an
	// eligible one.
	Excluded string `json:"excluded,omitempty"`
	// CostMicrocents is the skill's cost, -1 when unknown.
	CostMicrocents int64 `json:"cost_microcents"`
	// Reputation: the RDP score and confidence in the skill's domain.
	Reputation *RouteReputation `json:"reputation,omitempty"`
	// QualityHint is the card's self-reported hint, -1 when none.
	QualityHint float64 `json:"quality_hint"`
	// Rank is the score candidates are ordered by (see Route).
	Rank float64 `json:"rank"`
	// Why explains the rank in words.
	Why string `json:"why"`
}

// RouteReputation is a reputation as the router used it.
type RouteReputation struct {
	Score      float64 `json:"score"`
	Confidence float64 `json:"confidence"`
	Samples    int     `json:"samples"`
}

// neutral is the score of a delegate nobody has observed: RDP does not
// say unknown is 0.5, but a router must put the unknown somewhere between
// the known good and the known bad.
const neutral = 0.5

// Route weighs the delegates (their cards, fetched from urls; a nil card
// is one that could not be read, with its reason in errs) for req and
// returns them best first, the excluded last. A delegate is excluded when
// its card lists no capability named req.Skill, when it would refuse a
// session from req.TrustDomain (§7.2, as its card states its domain), or
// when its cost is over req.Budget (or unknown with a budget). Eligible
// delegates are ranked by
//
//	confidence × score + (1 − confidence) × 0.5
//
// of the reputation this router holds for them in the skill's domain (RDP
// confidence grows with the number of signals), 0.5 for a delegate
// without one; the card's self-reported quality hint only breaks ties
// (so it decides among delegates nobody has observed), then the lower
// cost, then the order given.
func Route(req RouteRequest, urls []string, cards []*IdentityCard, errs []error) []Candidate {
	out := make([]Candidate, len(urls))
	for i, u := range urls {
		c := Candidate{URL: u, Card: cards[i], CostMicrocents: -1, QualityHint: -1}
		if cards[i] == nil {
			c.Excluded = "identity card: " + errs[i].Error()
			out[i] = c
			continue
		}
		weigh(&c, req)
		out[i] = c
	}
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := &out[order[a]], &out[order[b]]
		if (x.Excluded == "") != (y.Excluded == "") {
			return x.Excluded == ""
		}
		if x.Excluded != "" {
			return false // the excluded keep the order given
		}
		if x.Rank != y.Rank {
			return x.Rank > y.Rank
		}
		if x.QualityHint != y.QualityHint {
			return x.QualityHint > y.QualityHint
		}
		return x.CostMicrocents >= 0 && (y.CostMicrocents < 0 || x.CostMicrocents < y.CostMicrocents)
	})
	sorted := make([]Candidate, len(out))
	for i, j := range order {
		sorted[i] = out[j]
	}
	return sorted
}

func weigh(c *Candidate, req RouteRequest) {
	card := c.Card
	c.DelegateID = card.DelegateID
	if did := card.Metadata[MetaDID]; did != "" {
		if _, err := identity.PublicKeyFromDID(did); err == nil {
			c.DID = did
		}
	}
	capab := card.Capability(req.Skill)
	if capab == nil {
		c.Excluded = fmt.Sprintf("no skill %q", req.Skill)
		return
	}
	if q, ok := capab.QualityScore(); ok {
		c.QualityHint = q
	}
	c.CostMicrocents = skillCost(card, capab)
	if err := CheckTrust(card.TrustDomain, req.TrustDomain, req.RequiredDomain); err != nil {
		c.Excluded = "trust domain: " + err.Error()
		return
	}
	if req.Budget > 0 {
		switch {
		case c.CostMicrocents < 0:
			c.Excluded = fmt.Sprintf("its cost for %s is unknown, and the budget is %d microcents", req.Skill, req.Budget)
			return
		case c.CostMicrocents > req.Budget:
			c.Excluded = fmt.Sprintf("costs %d microcents, over the budget of %d", c.CostMicrocents, req.Budget)
			return
		}
	}
	var why []string
	if req.Reputation != nil && c.DID != "" {
		if s, conf, n, ok := req.Reputation(c.DID, req.Skill); ok {
			c.Reputation = &RouteReputation{Score: s, Confidence: conf, Samples: n}
			c.Rank = conf*s + (1-conf)*neutral
			why = append(why, fmt.Sprintf("RDP %s score %.2f with confidence %.2f (%d signals)", req.Skill, s, conf, n))
		}
	}
	if c.Reputation == nil {
		c.Rank = neutral
		if c.DID == "" {
			why = append(why, "no reputation (the card names no did:key)")
		} else {
			why = append(why, "no reputation held for "+c.DID)
		}
		if c.QualityHint >= 0 {
			why = append(why, fmt.Sprintf("self-reported quality %.2f", c.QualityHint))
		}
	}
	if c.CostMicrocents >= 0 {
		why = append(why, fmt.Sprintf("cost %d microcents", c.CostMicrocents))
	}
	c.Rank = math.Round(c.Rank*1e6) / 1e6
	c.Why = strings.Join(why, "; ")
}

// skillCost is the card's cost for a skill in microcents: its
// MetaCostPrefix entry, else the reference's cost_per_call_usd; -1 when
// it states neither (or states it badly).
func skillCost(card *IdentityCard, c *Capability) int64 {
	if v, ok := card.Metadata[MetaCostPrefix+c.Name]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return -1
		}
		return n
	}
	if c.Quality != nil && c.Quality.CostPerCallUSD != nil {
		usd := *c.Quality.CostPerCallUSD
		if usd >= 0 && usd <= float64(math.MaxInt64)/MicrocentsPerUSD {
			return int64(math.Ceil(usd * MicrocentsPerUSD))
		}
	}
	return -1
}
