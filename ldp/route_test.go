package ldp

import (
	"errors"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
)

func routeCard(id, domain string, quality float64, cost string, did string) *IdentityCard {
	c := &IdentityCard{DelegateID: "ldp:delegate:" + id, Name: id, ModelFamily: "f", ModelVersion: "v",
		TrustDomain: TrustDomain{Name: domain}, ContextWindow: 1, SupportedPayloadModes: []PayloadMode{ModeText},
		Endpoint: "http://" + id, Capabilities: []Capability{{Name: "reasoning", QualityHint: &quality}},
		Metadata: map[string]string{}}
	if cost != "" {
		c.Metadata[MetaCostPrefix+"reasoning"] = cost
	}
	if did != "" {
		c.Metadata[MetaDID] = did
	}
	return c
}

func TestRoute(t *testing.T) {
	rep := map[string][3]float64{ // did → score, confidence, samples
		testDID(1): {0.9, 0.8, 20}, // proven good: 0.82
		testDID(2): {0.3, 0.9, 40}, // proven bad: 0.32
		testDID(3): {0.99, 0.1, 1}, // one lucky signal: 0.549
	}
	lookup := func(did, skill string) (float64, float64, int, bool) {
		r, ok := rep[did]
		return r[0], r[1], int(r[2]), ok && skill == "reasoning"
	}
	urls := []string{"u-bad", "u-lucky", "u-unknown-high", "u-good", "u-unknown-low", "u-other-domain", "u-expensive", "u-no-skill", "u-broken", "u-no-cost"}
	cards := []*IdentityCard{
		routeCard("bad", "research", 0.99, "100", testDID(2)),
		routeCard("lucky", "research", 0.5, "100", testDID(3)),
		routeCard("unknown-high", "research", 0.95, "100", testDID(4)),
		routeCard("good", "research", 0.1, "100", testDID(1)),
		routeCard("unknown-low", "research", 0.6, "50", ""),
		routeCard("other-domain", "finance", 1, "1", testDID(1)),
		routeCard("expensive", "research", 1, "5000", testDID(1)),
		func() *IdentityCard {
			c := routeCard("no-skill", "research", 1, "1", "")
			c.Capabilities[0].Name = "poetry"
			return c
		}(),
		nil,
		routeCard("no-cost", "research", 1, "", testDID(1)),
	}
	errs := make([]error, len(urls))
	errs[8] = errors.New("404 Not Found")
	got := Route(RouteRequest{Skill: "reasoning", Budget: 1000, TrustDomain: "research", Reputation: lookup}, urls, cards, errs)
	var order []string
	for _, c := range got {
		order = append(order, c.URL)
	}
	want := []string{"u-good", "u-lucky", "u-unknown-high", "u-unknown-low", "u-bad", "u-other-domain", "u-expensive", "u-no-skill", "u-broken", "u-no-cost"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("order\n got %v\nwant %v", order, want)
	}
	if got[0].Rank != 0.82 || got[0].Reputation.Samples != 20 || !strings.Contains(got[0].Why, "RDP reasoning score 0.90 with confidence 0.80 (20 signals)") {
		t.Fatalf("best: %+v", got[0])
	}
	if got[2].Reputation != nil || !strings.Contains(got[2].Why, "self-reported quality 0.95") {
		t.Fatalf("unknown: %+v", got[2])
	}
	for _, c := range got[5:] {
		if c.Excluded == "" {
			t.Fatalf("%s not excluded", c.URL)
		}
	}
	for url, want := range map[string]string{
		"u-other-domain": CodeCrossDomainRefused, "u-expensive": "over the budget", "u-no-skill": `no skill "reasoning"`,
		"u-broken": "404", "u-no-cost": "unknown",
	} {
		for _, c := range got {
			if c.URL == url && !strings.Contains(c.Excluded, want) {
				t.Errorf("%s excluded for %q, want %q", url, c.Excluded, want)
			}
		}
	}
	// Without reputation, the hints decide; without a budget, cost does not exclude.
	got = Route(RouteRequest{Skill: "reasoning", TrustDomain: "research"}, urls[:5], cards[:5], errs[:5])
	if got[0].URL != "u-bad" || got[1].URL != "u-unknown-high" {
		t.Fatalf("by hint: %v %v", got[0].URL, got[1].URL)
	}
}

func TestSkillCost(t *testing.T) {
	c := routeCard("x", "d", 1, "", "")
	capab := &c.Capabilities[0]
	if skillCost(c, capab) != -1 {
		t.Fatal("no cost stated")
	}
	capab.Quality = &QualityMetrics{CostPerCallUSD: ptr(0.01)}
	if got := skillCost(c, capab); got != 1_000_000 {
		t.Fatalf("0.01 USD = %d microcents", got)
	}
	c.Metadata[MetaCostPrefix+"reasoning"] = "-5"
	if skillCost(c, capab) != -1 {
		t.Fatal("negative cost taken")
	}
	c.Metadata[MetaCostPrefix+"reasoning"] = "42"
	if skillCost(c, capab) != 42 {
		t.Fatal("metadata cost")
	}
}

func TestTokenFormat(t *testing.T) {
	if TokenFormat != dct.Format {
		t.Fatalf("TokenFormat %q, dct.Format %q", TokenFormat, dct.Format)
	}
}
