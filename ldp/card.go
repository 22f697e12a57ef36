package ldp

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/internal/strictjson"
)

// WellKnownPath is where a delegate serves its identity card (§2.3).
const WellKnownPath = "/.well-known/ldp-identity"

// DelegateIDPrefix starts every delegate ID (§2.1).
const DelegateIDPrefix = "ldp:delegate:"

// IdentityCard is a delegate's identity card (§2.1).
type IdentityCard struct {
	DelegateID            string            `json:"delegate_id"`
	Name                  string            `json:"name"`
	Description           string            `json:"description,omitempty"`
	ModelFamily           string            `json:"model_family"`
	ModelVersion          string            `json:"model_version"`
	WeightsFingerprint    string            `json:"weights_fingerprint,omitempty"`
	TrustDomain           TrustDomain       `json:"trust_domain"`
	ContextWindow         uint64            `json:"context_window"`
	ReasoningProfile      string            `json:"reasoning_profile,omitempty"`
	CostProfile           string            `json:"cost_profile,omitempty"`
	LatencyProfile        string            `json:"latency_profile,omitempty"`
	Jurisdiction          string            `json:"jurisdiction,omitempty"`
	Capabilities          []Capability      `json:"capabilities"`
	SupportedPayloadModes []PayloadMode     `json:"supported_payload_modes"`
	Endpoint              string            `json:"endpoint"`
	Metadata              map[string]string `json:"metadata,omitempty"`
}

// Capability is a skill with its hints (§2.2). The spec's members come
// first; the rest are the reference SDKs' (their QualityMetrics carries the
// same hints under other names).
type Capability struct {
	Name             string   `json:"name"`
	QualityHint      *float64 `json:"quality_hint,omitempty"`
	LatencyHintMsP50 *uint64  `json:"latency_hint_ms_p50,omitempty"`
	CostHint         string   `json:"cost_hint,omitempty"`

	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Quality      *QualityMetrics `json:"quality,omitempty"`
	Domains      []string        `json:"domains,omitempty"`
}

// QualityMetrics is the reference SDKs' form of a capability's hints.
type QualityMetrics struct {
	QualityScore      *float64 `json:"quality_score,omitempty"`
	LatencyP50Ms      *uint64  `json:"latency_p50_ms,omitempty"`
	LatencyP99Ms      *uint64  `json:"latency_p99_ms,omitempty"`
	CostPerCallUSD    *float64 `json:"cost_per_call_usd,omitempty"`
	MaxTokens         *uint64  `json:"max_tokens,omitempty"`
	SupportsStreaming bool     `json:"supports_streaming,omitempty"`
	ClaimType         string   `json:"claim_type,omitempty"`
}

var (
	costTiers  = []string{"low", "medium", "high"}
	claimTypes = []string{"self_claimed", "issuer_attested", "runtime_observed", "externally_benchmarked"}
	// cardRequired are §2.1's required members.
	cardRequired = []string{"delegate_id", "name", "model_family", "model_version", "trust_domain",
		"context_window", "capabilities", "supported_payload_modes", "endpoint"}
)

// QualityScore returns the capability's quality hint: quality_hint, else the
// reference's quality.quality_score; ok is false when it has neither.
func (c *Capability) QualityScore() (q float64, ok bool) {
	if c.QualityHint != nil {
		return *c.QualityHint, true
	}
	if c.Quality != nil && c.Quality.QualityScore != nil {
		return *c.Quality.QualityScore, true
	}
	return 0, false
}

// Capability returns the card's capability named name, nil if none.
func (c *IdentityCard) Capability(name string) *Capability {
	for i := range c.Capabilities {
		if c.Capabilities[i].Name == name {
			return &c.Capabilities[i]
		}
	}
	return nil
}

// ParseCard reads an identity card from untrusted bytes: at most
// MaxCardSize, strict JSON (no duplicate or unknown members), every
// required member of §2.1 present, and Validate passing.
func ParseCard(data []byte) (*IdentityCard, error) {
	if len(data) > MaxCardSize {
		return nil, fmt.Errorf("identity card is %d bytes, at most %d", len(data), MaxCardSize)
	}
	if err := strictjson.Check(data); err != nil {
		return nil, fmt.Errorf("identity card: %v", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil || members == nil {
		return nil, fmt.Errorf("identity card is not a JSON object")
	}
	for _, name := range cardRequired {
		if v, ok := members[name]; !ok || isNull(v) {
			return nil, fmt.Errorf("identity card: required member %s is missing", name)
		}
	}
	var c IdentityCard
	if err := strictjson.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("identity card: %v", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the card's values: a delegate_id of the form
// ldp:delegate:<name>, non-empty required text, a context window, at least
// Text among the payload modes (§4.1: every delegate supports it), an
// absolute http, https or ldp endpoint, hints within their ranges, cost
// tiers of §2.2, unique capability names, and everything bounded.
func (c *IdentityCard) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("identity card: %w", err)
	}
	return nil
}

func (c *IdentityCard) validate() error {
	if err := checkID("delegate_id", c.DelegateID, true); err != nil {
		return err
	}
	if name, ok := strings.CutPrefix(c.DelegateID, DelegateIDPrefix); !ok || name == "" {
		return fmt.Errorf("delegate_id %q is not of the form %s<name>", clip(c.DelegateID), DelegateIDPrefix)
	}
	for _, f := range []struct{ name, v string }{{"name", c.Name}, {"model_family", c.ModelFamily}, {"model_version", c.ModelVersion}} {
		if f.v == "" {
			return fmt.Errorf("%s is empty", f.name)
		}
		if err := checkText(f.name, f.v, MaxIDLen); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, v string }{{"description", c.Description}, {"weights_fingerprint", c.WeightsFingerprint},
		{"reasoning_profile", c.ReasoningProfile}, {"latency_profile", c.LatencyProfile}, {"jurisdiction", c.Jurisdiction}} {
		if err := checkFreeText(f.name, f.v); err != nil {
			return err
		}
	}
	if err := oneOf("cost_profile", c.CostProfile, costTiers, false); err != nil {
		return err
	}
	if err := c.TrustDomain.check(); err != nil {
		return err
	}
	if c.ContextWindow == 0 {
		return fmt.Errorf("context_window is 0")
	}
	if err := checkModes("supported_payload_modes", c.SupportedPayloadModes); err != nil {
		return err
	}
	if !containsMode(c.SupportedPayloadModes, ModeText) {
		return fmt.Errorf("supported_payload_modes does not list text, which every delegate must support (§4.1)")
	}
	if err := checkEndpoint(c.Endpoint); err != nil {
		return err
	}
	if len(c.Capabilities) > MaxListLen {
		return fmt.Errorf("%d capabilities, at most %d", len(c.Capabilities), MaxListLen)
	}
	for i := range c.Capabilities {
		cp := &c.Capabilities[i]
		if err := cp.check(); err != nil {
			return fmt.Errorf("capability %d: %w", i, err)
		}
		if c.Capability(cp.Name) != cp {
			return fmt.Errorf("capability %q listed twice", cp.Name)
		}
	}
	if len(c.Metadata) > MaxListLen {
		return fmt.Errorf("metadata has %d entries, at most %d", len(c.Metadata), MaxListLen)
	}
	for k, v := range c.Metadata {
		if err := checkText("metadata key", k, MaxIDLen); err != nil || k == "" {
			return fmt.Errorf("metadata key %q is empty or invalid", clip(k))
		}
		if err := checkFreeText("metadata "+clip(k), v); err != nil {
			return err
		}
	}
	return nil
}

func containsMode(ms []PayloadMode, m PayloadMode) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

func checkEndpoint(s string) error {
	if s == "" {
		return fmt.Errorf("endpoint is empty")
	}
	if err := checkText("endpoint", s, MaxTextLen); err != nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("endpoint: %v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ldp") || u.Host == "" || u.User != nil {
		return fmt.Errorf("endpoint %q is not an absolute http, https or ldp URL without user information", clip(s))
	}
	return nil
}

func (c *Capability) check() error {
	if err := checkID("name", c.Name, true); err != nil {
		return err
	}
	if err := checkUnit("quality_hint", c.QualityHint); err != nil {
		return err
	}
	if err := oneOf("cost_hint", c.CostHint, costTiers, false); err != nil {
		return err
	}
	if err := checkFreeText("description", c.Description); err != nil {
		return err
	}
	if len(c.Domains) > MaxListLen {
		return fmt.Errorf("%d domains, at most %d", len(c.Domains), MaxListLen)
	}
	for _, d := range c.Domains {
		if err := checkID("domain", d, true); err != nil {
			return err
		}
	}
	if q := c.Quality; q != nil {
		if err := checkUnit("quality.quality_score", q.QualityScore); err != nil {
			return err
		}
		if q.CostPerCallUSD != nil && !(*q.CostPerCallUSD >= 0) {
			return fmt.Errorf("quality.cost_per_call_usd %v is negative", *q.CostPerCallUSD)
		}
		if err := oneOf("quality.claim_type", q.ClaimType, claimTypes, false); err != nil {
			return err
		}
	}
	return nil
}

// Labels returns the card as the §9.1 agent-card labels.
func (c *IdentityCard) Labels() map[string]string {
	l := map[string]string{
		"ldp.delegate_id":    c.DelegateID,
		"ldp.model_family":   c.ModelFamily,
		"ldp.model_version":  c.ModelVersion,
		"ldp.trust_domain":   c.TrustDomain.Name,
		"ldp.context_window": strconv.FormatUint(c.ContextWindow, 10),
	}
	for k, v := range map[string]string{
		"ldp.weights_fingerprint": c.WeightsFingerprint,
		"ldp.reasoning_profile":   c.ReasoningProfile,
		"ldp.cost_profile":        c.CostProfile,
		"ldp.latency_profile":     c.LatencyProfile,
		"ldp.jurisdiction":        c.Jurisdiction,
	} {
		if v != "" {
			l[k] = v
		}
	}
	modes := make([]string, len(c.SupportedPayloadModes))
	for i, m := range c.SupportedPayloadModes {
		modes[i] = string(m)
	}
	l["ldp.payload_modes"] = strings.Join(modes, ",")
	return l
}

// MarshalJSON writes the card with empty lists as [] rather than null: the
// reference SDKs (and ParseCard, for capabilities) refuse a null list.
func (c IdentityCard) MarshalJSON() ([]byte, error) {
	type plain IdentityCard
	p := plain(c)
	if p.Capabilities == nil {
		p.Capabilities = []Capability{}
	}
	if p.TrustDomain.TrustedPeers == nil {
		p.TrustDomain.TrustedPeers = []string{}
	}
	return json.Marshal(p)
}
