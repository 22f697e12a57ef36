package policy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/identity"
)

// TestParseLDPIdentity: the identity card's optional members (LDP §2.1),
// which the agent card carries as ldp.* labels (§9.1), are read as given;
// a cost profile other than the card's three tiers, or a value a card
// could not carry, is refused.
func TestParseLDPIdentity(t *testing.T) {
	extra := "  weights_fingerprint: sha256:4f2a\n  reasoning_profile: analytical\n  cost_profile: medium\n" +
		"  latency_profile: p50:1ms\n  jurisdiction: EU\n  skills:"
	p, err := Parse([]byte(strings.Replace(ldpPolicy, "  skills:", extra, 1)), "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	c := p.LDP
	if c.WeightsFingerprint != "sha256:4f2a" || c.ReasoningProfile != "analytical" || c.CostProfile != "medium" ||
		c.LatencyProfile != "p50:1ms" || c.Jurisdiction != "EU" {
		t.Fatalf("%+v", c)
	}
	if p, _ := Parse([]byte(ldpPolicy), "/tmp"); p.LDP.WeightsFingerprint+p.LDP.ReasoningProfile+p.LDP.CostProfile+p.LDP.LatencyProfile+p.LDP.Jurisdiction != "" {
		t.Fatalf("optional members from nowhere: %+v", p.LDP)
	}
	for _, bad := range []struct{ line, want string }{
		{"cost_profile: cheap", "ldp.cost_profile: must be low, medium or high"},
		{"jurisdiction: \"EU|US\"", "ldp.jurisdiction: must be at most 256 characters without control characters or '|'"},
		{"reasoning_profile: \"a\\nb\"", "ldp.reasoning_profile: must be at most 256"},
		{"weights_fingerprint: " + strings.Repeat("f", 257), "ldp.weights_fingerprint: must be at most 256"},
		{"latency_profile: [1]", "ldp.latency_profile"},
	} {
		_, err := Parse([]byte(strings.Replace(ldpPolicy, "  skills:", "  "+bad.line+"\n  skills:", 1)), "/tmp")
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.line, err, bad.want)
		}
	}
}

// TestParseLDPApprovers: ldp.approvers are principals (did:key or IDs),
// normalized; anything else, or one twice, is refused.
func TestParseLDPApprovers(t *testing.T) {
	k, err := identity.FromSeed(bytes.Repeat([]byte{7}, 32), "approver")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse([]byte(strings.Replace(ldpPolicy, "  skills:", "  approvers: ["+k.DID()+"]\n  skills:", 1)), "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.LDP.Approvers) != 1 || p.LDP.Approvers[0] != k.ID() {
		t.Fatalf("approvers %v", p.LDP.Approvers)
	}
	if p, _ := Parse([]byte(ldpPolicy), "/tmp"); p.LDP.Approvers != nil {
		t.Fatalf("approvers from nowhere: %v", p.LDP.Approvers)
	}
	for _, bad := range []string{"[alice]", "[" + k.DID() + ", " + k.ID() + "]", "x"} {
		if _, err := Parse([]byte(strings.Replace(ldpPolicy, "  skills:", "  approvers: "+bad+"\n  skills:", 1)), "/tmp"); err == nil || !strings.Contains(err.Error(), "ldp.approvers") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
