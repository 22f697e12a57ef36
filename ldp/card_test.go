package ldp

import (
	"encoding/json"
	"strings"
	"testing"
)

// specCard is the card of §2.1 and §2.2 with every optional member.
const specCard = `{"delegate_id":"ldp:delegate:qwen3-8b-reasoning","name":"Qwen3 8B Reasoning Specialist","description":"Deep analytical reasoning","model_family":"qwen","model_version":"qwen3-8b-2026.01","weights_fingerprint":"sha256:a1b2c3d4e5f6","trust_domain":{"name":"research.internal","allow_cross_domain":false,"trusted_peers":[]},"context_window":32768,"reasoning_profile":"deep-analytical","cost_profile":"medium","latency_profile":"p50:5000ms","jurisdiction":"in-west","capabilities":[{"name":"reasoning","quality_hint":0.85,"latency_hint_ms_p50":5000,"cost_hint":"medium"},{"name":"analysis","quality_hint":0.82,"latency_hint_ms_p50":4500,"cost_hint":"medium"}],"supported_payload_modes":["semantic_frame","text"],"endpoint":"ldp://localhost:8080/delegates/qwen3-8b","metadata":{}}`

// pythonCard is what the reference's Python SDK serves (model_dump): nulls
// for unset members and its QualityMetrics form of the hints.
const pythonCard = `{"delegate_id":"ldp:delegate:my-agent","name":"My Agent","description":null,"model_family":"claude","model_version":"claude-sonnet-4-6","weights_fingerprint":null,"trust_domain":{"name":"default","allow_cross_domain":false,"trusted_peers":[]},"context_window":128000,"reasoning_profile":null,"cost_profile":null,"latency_profile":null,"jurisdiction":null,"capabilities":[{"name":"reasoning","description":null,"input_schema":null,"output_schema":null,"quality":{"quality_score":0.85,"latency_p50_ms":null,"latency_p99_ms":null,"cost_per_call_usd":0.01,"max_tokens":null,"supports_streaming":false,"claim_type":"self_claimed"},"domains":[]}],"supported_payload_modes":["semantic_frame","text"],"endpoint":"http://127.0.0.1:8090","metadata":{}}`

func TestParseCard(t *testing.T) {
	c, err := ParseCard([]byte(specCard))
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := c.Capability("analysis").QualityScore(); !ok || q != 0.82 {
		t.Fatalf("analysis quality %v %v", q, ok)
	}
	if c.Capability("nope") != nil {
		t.Fatal("found a capability the card does not list")
	}
	p, err := ParseCard([]byte(pythonCard))
	if err != nil {
		t.Fatalf("the reference SDK's card: %v", err)
	}
	if q, ok := p.Capability("reasoning").QualityScore(); !ok || q != 0.85 {
		t.Fatalf("reasoning quality %v %v", q, ok)
	}
	b, _ := json.Marshal(c)
	if c2, err := ParseCard(b); err != nil || c2.DelegateID != c.DelegateID {
		t.Fatalf("round trip: %v", err)
	}
}

func TestParseCardRefuses(t *testing.T) {
	rep := func(old, new string) string {
		if !strings.Contains(specCard, old) {
			t.Fatalf("%q not in the card", old)
		}
		return strings.Replace(specCard, old, new, 1)
	}
	cases := []struct{ name, in, want string }{
		{"missing endpoint", rep(`,"endpoint":"ldp://localhost:8080/delegates/qwen3-8b"`, ``), "endpoint is missing"},
		{"missing capabilities", strings.Replace(specCard, `"capabilities":[{"name":"reasoning","quality_hint":0.85,"latency_hint_ms_p50":5000,"cost_hint":"medium"},{"name":"analysis","quality_hint":0.82,"latency_hint_ms_p50":4500,"cost_hint":"medium"}],`, ``, 1), "capabilities is missing"},
		{"null trust domain", rep(`"trust_domain":{"name":"research.internal","allow_cross_domain":false,"trusted_peers":[]}`, `"trust_domain":null`), "trust_domain is missing"},
		{"delegate_id form", rep(`"ldp:delegate:qwen3-8b-reasoning"`, `"qwen3"`), "ldp:delegate:"},
		{"empty name", rep(`"Qwen3 8B Reasoning Specialist"`, `""`), "name is empty"},
		{"zero context", rep(`32768`, `0`), "context_window"},
		{"no text mode", rep(`["semantic_frame","text"]`, `["semantic_frame"]`), "text"},
		{"unknown mode", rep(`["semantic_frame","text"]`, `["telepathy","text"]`), "telepathy"},
		{"relative endpoint", rep(`ldp://localhost:8080/delegates/qwen3-8b`, `/delegates/x`), "endpoint"},
		{"ftp endpoint", rep(`ldp://localhost:8080/delegates/qwen3-8b`, `ftp://x/`), "endpoint"},
		{"endpoint with user", rep(`ldp://localhost:8080/delegates/qwen3-8b`, `http://u:p@x/`), "endpoint"},
		{"quality above 1", rep(`0.85`, `1.85`), "quality_hint"},
		{"cost tier", rep(`"cost_hint":"medium"`, `"cost_hint":"cheap"`), "cost_hint"},
		{"cost profile", rep(`"cost_profile":"medium"`, `"cost_profile":"free"`), "cost_profile"},
		{"repeated capability", rep(`"name":"analysis"`, `"name":"reasoning"`), "twice"},
		{"unknown member", rep(`"metadata":{}`, `"metadata":{},"x":1`), "x"},
		{"duplicate member", rep(`"name":"Qwen3`, `"name":"A","name":"Qwen3`), "duplicate"},
		{"control in metadata", rep(`"metadata":{}`, `"metadata":{"k":"\u001b[31m"}`), "control"},
		{"empty trust domain", rep(`"name":"research.internal"`, `"name":""`), "trust_domain.name"},
		{"too large", rep(`"metadata":{}`, `"metadata":{"k":"`+strings.Repeat("a", MaxCardSize)+`"}`), "at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseCard([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}

func TestCardLabels(t *testing.T) {
	c, err := ParseCard([]byte(specCard))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ldp.delegate_id": "ldp:delegate:qwen3-8b-reasoning", "ldp.model_family": "qwen",
		"ldp.model_version": "qwen3-8b-2026.01", "ldp.trust_domain": "research.internal",
		"ldp.context_window": "32768", "ldp.weights_fingerprint": "sha256:a1b2c3d4e5f6",
		"ldp.reasoning_profile": "deep-analytical", "ldp.cost_profile": "medium",
		"ldp.latency_profile": "p50:5000ms", "ldp.jurisdiction": "in-west",
		"ldp.payload_modes": "semantic_frame,text",
	}
	got := c.Labels()
	if len(got) != len(want) {
		t.Fatalf("labels %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %q, want %q", k, got[k], v)
		}
	}
	p, _ := ParseCard([]byte(pythonCard))
	if _, ok := p.Labels()["ldp.jurisdiction"]; ok {
		t.Fatal("an unset optional member became a label")
	}
}

// TestCardMarshalEmptyLists: a card built without capabilities or trusted
// peers is written with [] (the reference SDKs refuse null lists) and
// reads back.
func TestCardMarshalEmptyLists(t *testing.T) {
	c := &IdentityCard{DelegateID: "ldp:delegate:x", Name: "X", ModelFamily: "f", ModelVersion: "v",
		TrustDomain: TrustDomain{Name: "d"}, ContextWindow: 1, SupportedPayloadModes: []PayloadMode{ModeText},
		Endpoint: "http://127.0.0.1:1"}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"trusted_peers":[]`) || !strings.Contains(string(b), `"capabilities":[]`) {
		t.Fatalf("%s", b)
	}
	if _, err := ParseCard(b); err != nil {
		t.Fatal(err)
	}
}
