package metrics

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
)

// testGate is a real Gate whose token grants mcp:echo:* with a budget, and the
// token.
func testGate(t *testing.T, m *Metrics) (*gate.Gate, string) {
	t.Helper()
	root, _ := identity.FromSeed(bytes.Repeat([]byte{1}, 32), "root")
	agent, _ := identity.FromSeed(bytes.Repeat([]byte{2}, 32), "agent")
	now := time.Now()
	tok, err := dct.Create(dct.CreateParams{
		Issuer: root, Delegatee: agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_metrics", DelegationID: "del_metrics",
		MaxChainDepth: 1, MaxBudgetMicrocents: 1_000_000,
		IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	pol := policy.Default()
	pol.Roots = []string{root.ID()}
	v, err := dct.NewVerifier(dct.Options{Roots: pol.Roots})
	if err != nil {
		t.Fatal(err)
	}
	return &gate.Gate{Policy: pol, Verifier: v, Budget: budget.NewMemory(), Observer: m}, tok.String()
}

func TestGateDecisionsCounted(t *testing.T) {
	m := New()
	g, tok := testGate(t, m)
	d := g.Decide(gate.CallRequest{Tool: "echo", Token: tok})
	if !d.Allowed {
		t.Fatalf("denied: %+v", d.Denial)
	}
	if _, err := g.Settle(&d, 0, false); err != nil {
		t.Fatal(err)
	}
	g.Decide(gate.CallRequest{Tool: "rm", Token: tok})
	g.Decide(gate.CallRequest{Tool: "echo", Token: "garbage"})
	g.Decide(gate.CallRequest{Method: gate.MethodResourcesRead, URI: "file:///x", Token: tok})

	for _, c := range []struct {
		method, result string
		want           float64
	}{
		{"tools/call", "allowed", 1},
		{"tools/call", "capability_not_granted", 1},
		{"tools/call", "malformed_token", 1},
		{"resources/read", "capability_not_granted", 1},
	} {
		if got := testutil.ToFloat64(m.decisions.WithLabelValues(c.method, c.result)); got != c.want {
			t.Errorf("decisions{%s,%s} = %v, want %v", c.method, c.result, got, c.want)
		}
	}
	text := exposition(m)
	for _, want := range []string{
		`delegateos_decision_duration_seconds_count{method="tools/call"} 3`,
		`delegateos_decision_duration_seconds_count{method="resources/read"} 1`,
		`delegateos_decision_duration_seconds_count{method="prompts/get"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	// The allowed call was settled with cost 0 (the default policy's);
	// its upstream time was observed under its method.
	if got := testutil.ToFloat64(m.spend); got != 0 {
		t.Errorf("spend %v", got)
	}
	if text := exposition(m); !strings.Contains(text, `delegateos_upstream_duration_seconds_count{method="tools/call"} 1`) ||
		!strings.Contains(text, `delegateos_upstream_duration_seconds_count{method="resources/read"} 0`) {
		t.Errorf("upstream latency:\n%s", grep(text, "upstream_duration_seconds_count"))
	}
	d = g.Decide(gate.CallRequest{Tool: "echo", Token: tok})
	g.Settle(&d, 0, true) // released: not charged, still timed
	m.Settled(gate.SettledCall{Method: "", Charged: 250})
	if got := testutil.ToFloat64(m.spend); got != 250 {
		t.Errorf("spend %v", got)
	}
}

// TestSpendFromGate counts what the gate settles, once per call.
func TestSpendFromGate(t *testing.T) {
	m := New()
	g, tok := testGate(t, m)
	g.Policy.DefaultCost = 40
	for range 3 {
		d := g.Decide(gate.CallRequest{Tool: "echo", Token: tok})
		if !d.Allowed {
			t.Fatalf("denied: %+v", d.Denial)
		}
		if _, err := g.Settle(&d, 40, false); err != nil {
			t.Fatal(err)
		}
		g.Settle(&d, 40, false) // a second settle is a no-op, not counted
	}
	if got := testutil.ToFloat64(m.spend); got != 120 {
		t.Errorf("spend %v, want 120", got)
	}
}

type fakeServer struct{}

func (fakeServer) Sessions() int           { return 1 }
func (fakeServer) InFlight() int64         { return 3 }
func (fakeServer) UpstreamRestarts() int64 { return 2 }

func TestHooksAndExposition(t *testing.T) {
	m := New()
	m.WatchServer(fakeServer{})
	m.Settled(gate.SettledCall{Method: "tools/call", Upstream: time.Millisecond})
	m.Settled(gate.SettledCall{Method: "x/evil-method-name", Upstream: time.Millisecond})
	updated := time.Now().Add(-90 * time.Second)
	m.WatchRevocations(func() (int, time.Time) { return 42, updated })
	m.Decided(&gate.CallRequest{Method: "x/evil-method-name"}, &gate.Decision{Denial: &gate.Denial{Type: "revoked"}})

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", Path, nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		"delegateos_sessions 1",
		"delegateos_calls_in_flight 3",
		"delegateos_upstream_restarts_total 2",
		"delegateos_revocation_list_entries 42",
		`delegateos_upstream_duration_seconds_count{method="tools/call"} 1`,
		`delegateos_upstream_duration_seconds_count{method="other"} 1`,
		`delegateos_decisions_total{method="other",result="revoked"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	if strings.Contains(text, "evil") {
		t.Error("a client's method name became a label")
	}
	if !strings.Contains(text, "delegateos_revocation_list_age_seconds 9") { // 90.x s
		t.Errorf("age missing or wrong:\n%s", grep(text, "age_seconds"))
	}
}

func grep(text, s string) string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Every metric is exported before anything happens (at zero), so that a
// dashboard or alert sees a series from the start; tool calls are counted
// per tool only for the tools the policy names exactly, so a client
// cannot add series by calling tools by made-up names.
func TestMetricsPresentFromStartAndToolsBounded(t *testing.T) {
	m := New()
	m.BuildInfo("v1.2.3", "abc123")
	pol := policy.Default()
	pol.Tools = []policy.Rule{{Match: "read_file"}, {Match: "write_*"}, {Match: "echo"}, {Match: "x\xff"}}
	m.Tools(pol)
	text := exposition(m)
	for _, want := range []string{
		`delegateos_decisions_total{method="tools/call",result="allowed"} 0`,
		`delegateos_decisions_total{method="resources/read",result="budget_exceeded"} 0`,
		`delegateos_decisions_total{method="tools/call",result="store_reset"} 0`,
		`delegateos_decision_duration_seconds_count{method="prompts/get"} 0`,
		`delegateos_upstream_duration_seconds_count{method="tools/call"} 0`,
		`delegateos_spend_committed_microcents_total 0`,
		`delegateos_tool_calls_total{result="allowed",tool="read_file"} 0`,
		`delegateos_tool_calls_total{result="denied",tool="echo"} 0`,
		`delegateos_tool_calls_total{result="allowed",tool="other"} 0`,
		`delegateos_build_info{goversion="go`,
		`revision="abc123",version="v1.2.3"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition at start lacks %q", want)
		}
	}
	if strings.Contains(text, `tool="write_*"`) {
		t.Error("a glob rule became a tool label")
	}
	for _, tool := range []string{"echo", "made_up_1", "made_up_2", "write_file"} {
		m.Decided(&gate.CallRequest{Method: gate.MethodToolsCall, Tool: tool}, &gate.Decision{Allowed: true})
	}
	m.Decided(&gate.CallRequest{Tool: "echo"}, &gate.Decision{Denial: &gate.Denial{Type: dct.Expired}})
	text = exposition(m)
	for _, want := range []string{
		`delegateos_tool_calls_total{result="allowed",tool="echo"} 1`,
		`delegateos_tool_calls_total{result="denied",tool="echo"} 1`,
		`delegateos_tool_calls_total{result="allowed",tool="other"} 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q:\n%s", want, grep(text, "tool_calls"))
		}
	}
	if strings.Contains(text, "made_up") || strings.Contains(text, `tool="write_file"`) {
		t.Error("a tool the policy does not name became a label")
	}
}

func exposition(m *Metrics) string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", Path, nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}
