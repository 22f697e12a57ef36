package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// ldpSpecCard is the card of LDP §2.1/§2.2; ldpPythonCard the form the
// reference's Python SDK serves (nulls, its QualityMetrics), with its
// endpoint filled in by the test.
const (
	ldpSpecCard   = `{"delegate_id":"ldp:delegate:qwen3-8b-reasoning","name":"Qwen3 8B Reasoning Specialist","description":"Deep analytical reasoning","model_family":"qwen","model_version":"qwen3-8b-2026.01","weights_fingerprint":"sha256:a1b2c3d4e5f6","trust_domain":{"name":"research.internal","allow_cross_domain":false,"trusted_peers":[]},"context_window":32768,"reasoning_profile":"deep-analytical","cost_profile":"medium","latency_profile":"p50:5000ms","jurisdiction":"in-west","capabilities":[{"name":"reasoning","quality_hint":0.85,"latency_hint_ms_p50":5000,"cost_hint":"medium"},{"name":"analysis","quality_hint":0.82,"latency_hint_ms_p50":4500,"cost_hint":"medium"}],"supported_payload_modes":["semantic_frame","text"],"endpoint":"ldp://localhost:8080/delegates/qwen3-8b","metadata":{"owner":"research"}}`
	ldpPythonCard = `{"delegate_id":"ldp:delegate:my-agent","name":"My Agent","description":null,"model_family":"claude","model_version":"claude-sonnet-4-6","weights_fingerprint":null,"trust_domain":{"name":"default","allow_cross_domain":true,"trusted_peers":["research.internal"]},"context_window":128000,"reasoning_profile":null,"cost_profile":null,"latency_profile":null,"jurisdiction":null,"capabilities":[{"name":"reasoning","description":null,"input_schema":null,"output_schema":null,"quality":{"quality_score":0.85,"latency_p50_ms":null,"latency_p99_ms":null,"cost_per_call_usd":0.01,"max_tokens":null,"supports_streaming":false,"claim_type":"self_claimed"},"domains":[]}],"supported_payload_modes":["semantic_frame","text"],"endpoint":"ENDPOINT","metadata":{}}`
)

// ldpDelegates serves identity cards, good and bad, each under its own
// base path.
func ldpDelegates(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	// The server is started once every handler is in place: the binary's
	// requests come from another process, which the race detector cannot
	// see order after this goroutine's writes.
	srv := httptest.NewUnstartedServer(mux)
	base := "http://" + srv.Listener.Addr().String()
	card := func(path, contentType string, body func() string) {
		mux.HandleFunc("GET "+path+"/.well-known/ldp-identity", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.Write([]byte(body()))
		})
	}
	fixed := func(s string) func() string { return func() string { return s } }
	card("/spec", "application/json", fixed(ldpSpecCard))
	card("/python", "application/json; charset=utf-8", func() string {
		return strings.Replace(ldpPythonCard, "ENDPOINT", base+"/python", 1)
	})
	card("/duplicate", "application/json", fixed(strings.Replace(ldpSpecCard, `"name":"Qwen3`, `"name":"Trusted Bank","name":"Qwen3`, 1)))
	card("/unknown-member", "application/json", fixed(strings.Replace(ldpSpecCard, `"metadata"`, `"admin":true,"metadata"`, 1)))
	card("/no-endpoint", "application/json", fixed(strings.Replace(ldpSpecCard, `,"endpoint":"ldp://localhost:8080/delegates/qwen3-8b"`, ``, 1)))
	card("/no-text", "application/json", fixed(strings.Replace(ldpSpecCard, `["semantic_frame","text"]`, `["semantic_frame"]`, 1)))
	card("/escape", "application/json", fixed(strings.Replace(ldpSpecCard, `"owner":"research"`, `"owner":"\u001b]0;pwned\u0007"`, 1)))
	card("/forged-line", "application/json", fixed(strings.Replace(ldpSpecCard, `"owner":"research"`, `"owner":"research\n  capability:    admin (quality 1.00)"`, 1)))
	card("/html", "text/html", fixed(ldpSpecCard))
	card("/huge", "application/json", fixed(`{"x":"`+strings.Repeat("a", 300<<10)+`"}`))
	mux.HandleFunc("GET /redirect/.well-known/ldp-identity", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/spec/.well-known/ldp-identity", http.StatusFound)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestLDPDiscover(t *testing.T) {
	srv := ldpDelegates(t)
	// A metadata value with a line break cannot forge a line of output.
	out, errs, code := mcptest.CLI(t, "ldp", "discover", srv.URL+"/forged-line")
	if code != 0 || strings.Contains(out, "\n  capability:    admin") || !strings.Contains(out, `owner="research\n  capability:`) {
		t.Fatalf("forged line: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = mcptest.CLI(t, "ldp", "discover", srv.URL+"/spec", srv.URL+"/python/")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		srv.URL + "/spec: ldp:delegate:qwen3-8b-reasoning (Qwen3 8B Reasoning Specialist)",
		"model:         qwen qwen3-8b-2026.01, context 32768 tokens",
		"trust domain:  research.internal (no sessions from other domains)",
		"payload modes: semantic_frame, text",
		"endpoint:      ldp://localhost:8080/delegates/qwen3-8b (not the URL it was fetched from)",
		"capability:    reasoning (quality 0.85 (self-reported), p50 5000 ms, cost medium)",
		"metadata:      owner=research",
		srv.URL + "/python/: ldp:delegate:my-agent (My Agent)",
		"trust domain:  default (also trusts: research.internal)",
		"endpoint:      " + srv.URL + "/python\n",
		"capability:    reasoning (quality 0.85 (self-reported), $0.01 a call)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, errs, code = mcptest.CLI(t, "ldp", "discover", "--json", srv.URL+"/spec", srv.URL+"/python")
	var report discoverReport
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 0 {
		t.Fatalf("exit %d, %v\n%s%s", code, err, out, errs)
	}
	if report.Valid != 2 || report.Delegates[0].Card.Capabilities[1].Name != "analysis" ||
		report.Delegates[0].EndpointMatches || !report.Delegates[1].EndpointMatches ||
		report.Delegates[1].IdentityURL != srv.URL+"/python/.well-known/ldp-identity" {
		t.Fatalf("%+v", report)
	}
}

// TestLDPDiscoverRefuses: a card that is ambiguous, incomplete, of the
// wrong type, too large, redirected or in another domain is refused (exit
// 1), each with its reason, and the good ones are still shown.
func TestLDPDiscoverRefuses(t *testing.T) {
	srv := ldpDelegates(t)
	cases := map[string]string{
		"/duplicate":      `duplicate member "name"`,
		"/unknown-member": `unknown member "admin"`,
		"/no-endpoint":    "required member endpoint is missing",
		"/no-text":        "does not list text",
		"/escape":         "control character",
		"/html":           `Content-Type "text/html"`,
		"/huge":           "at most 262144",
		"/redirect":       "redirected (302 Found)",
		"/missing":        "404 Not Found",
	}
	args := []string{"ldp", "discover", srv.URL + "/spec"}
	for path := range cases {
		args = append(args, srv.URL+path)
	}
	out, errs, code := mcptest.CLI(t, args...)
	if code != 1 || !strings.Contains(errs, "9 of 10 identity cards refused") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, srv.URL+"/spec: ldp:delegate:qwen3-8b-reasoning") {
		t.Errorf("the good card is not shown:\n%s", out)
	}
	for path, want := range cases {
		line := srv.URL + path + ": refused: "
		i := strings.Index(out, line)
		if i < 0 || !strings.Contains(strings.SplitN(out[i:], "\n", 2)[0], want) {
			t.Errorf("%s: want a refusal saying %q:\n%s", path, want, out)
		}
	}
	if strings.Contains(out, "pwned") || strings.Contains(out, "\x1b") {
		t.Error("a control sequence from a card reached the terminal")
	}

	out, errs, code = mcptest.CLI(t, "ldp", "discover", "--require-domain", "finance.internal", srv.URL+"/spec")
	if code != 1 || !strings.Contains(out, `trust domain "research.internal" is not the required "finance.internal"`) {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if _, _, code = mcptest.CLI(t, "ldp", "discover", "--require-domain", "research.internal", srv.URL+"/spec"); code != 0 {
		t.Fatalf("required domain matches: exit %d", code)
	}
}

func TestLDPDiscoverUsage(t *testing.T) {
	for _, args := range [][]string{
		{"ldp", "discover"},
		{"ldp", "discover", "ftp://example.com"},
		{"ldp", "discover", "example.com"},
		{"ldp", "discover", "http://example.com/?x=1"},
		{"ldp", "discover", "http://user:pw@example.com/"},
		{"ldp", "discover", "--timeout", "0", "http://example.com/"},
	} {
		if _, errs, code := mcptest.CLI(t, args...); code != 2 || !strings.Contains(errs, "delegateos ldp discover") {
			t.Errorf("%v: exit %d, %s", args, code, errs)
		}
	}
}
