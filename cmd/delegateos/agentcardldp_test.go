package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestServeLDPAgentCardLabels: when serve speaks LDP, its A2A agent card
// carries the §9.1 ldp.* labels, every one the table of §9.1 names, each
// with the value of the identity card the same server serves; a server
// without an ldp section has no labels.
func TestServeLDPAgentCardLabels(t *testing.T) {
	env := mcptest.NewEnv(t)
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = strings.Replace(serveLDPSection, "  skills:", "  weights_fingerprint: sha256:4f2a\n  reasoning_profile: analytical\n"+
		"  cost_profile: low\n  latency_profile: p50:1ms\n  jurisdiction: EU\n  payload_modes: [text]\n  skills:", 1)
	server := mcptest.NewKey(t, "server")
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(server)}})

	card, err := (&ldp.Client{}).Discover(context.Background(), srv.Base)
	if err != nil {
		t.Fatal(err)
	}
	modes := make([]string, len(card.SupportedPayloadModes))
	for i, m := range card.SupportedPayloadModes {
		modes[i] = string(m)
	}
	// §9.1's table: the identity card's member, the label, and the value
	// the policy gave it.
	want := map[string]string{}
	for _, row := range []struct{ label, fromCard, fromPolicy string }{
		{"ldp.delegate_id", card.DelegateID, "ldp:delegate:docs"},
		{"ldp.model_family", card.ModelFamily, "none"},
		{"ldp.model_version", card.ModelVersion, "docserver-1"},
		{"ldp.trust_domain", card.TrustDomain.Name, "research"},
		{"ldp.context_window", strconv.FormatUint(card.ContextWindow, 10), "8192"},
		{"ldp.weights_fingerprint", card.WeightsFingerprint, "sha256:4f2a"},
		{"ldp.reasoning_profile", card.ReasoningProfile, "analytical"},
		{"ldp.cost_profile", card.CostProfile, "low"},
		{"ldp.latency_profile", card.LatencyProfile, "p50:1ms"},
		{"ldp.jurisdiction", card.Jurisdiction, "EU"},
		{"ldp.payload_modes", strings.Join(modes, ","), "text"},
	} {
		if row.fromCard != row.fromPolicy {
			t.Errorf("identity card: %s is %q, want %q", row.label, row.fromCard, row.fromPolicy)
		}
		want[row.label] = row.fromCard
	}

	doc := srv.Do("GET", "/.well-known/agent-card.json", nil, "").JSON()
	labels, _ := doc["labels"].(map[string]any)
	if len(labels) != len(want) {
		t.Errorf("agent card labels %v, want the %d of §9.1", labels, len(want))
	}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("agent card label %s = %v, want %q", k, labels[k], v)
		}
	}
	// The agent card and the identity card are the same server's.
	if ext, _ := doc["delegateos"].(map[string]any); ext["did"] != server.DID() || card.Metadata[ldp.MetaDID] != server.DID() {
		t.Errorf("agent card did %v, identity card did %q, want %s", ext["did"], card.Metadata[ldp.MetaDID], server.DID())
	}

	// Without an ldp section: no labels, and no identity card.
	plain := env.StartServe(mcptest.ServeOptions{Policy: env.Policy(mcptest.Priced("echo", 100)), Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "plain"))}})
	doc = plain.Do("GET", "/.well-known/agent-card.json", nil, "").JSON()
	if _, ok := doc["labels"]; ok || doc["delegateos"] == nil {
		t.Errorf("agent card of a server without LDP: %v", doc)
	}
	if _, err := (&ldp.Client{}).Discover(context.Background(), plain.Base); err == nil {
		t.Error("a server without an ldp section served an identity card")
	}
}
