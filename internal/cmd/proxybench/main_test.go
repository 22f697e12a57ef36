package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The built-in upstream answers the handshake, lists its tool, echoes a
// call with its id preserved and ignores notifications.
func TestServe(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/list"}`,
		string(callFrame(nil, 7)),
	}, "\n")
	var out bytes.Buffer
	if err := serve(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d responses, want 3:\n%s", len(lines), out.String())
	}
	var init struct {
		ID     int `json:"id"`
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &init); err != nil || init.Result.ProtocolVersion != "2025-06-18" {
		t.Errorf("initialize: %s (%v)", lines[0], err)
	}
	if !strings.Contains(lines[1], `"id":"a"`) || !strings.Contains(lines[1], `"name":"echo"`) {
		t.Errorf("tools/list: %s", lines[1])
	}
	want := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello, proxy"}],"isError":false}}`
	if lines[2] != want {
		t.Errorf("tools/call:\n got %s\nwant %s", lines[2], want)
	}
}

func TestSummarizeAndRatios(t *testing.T) {
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(100-i) * time.Microsecond
	}
	s := summarize(lat, []float64{3, 1, 2})
	if s.p50 != 51*time.Microsecond || s.p99 != 100*time.Microsecond || s.throughput != 2 {
		t.Errorf("summarize = %+v", s)
	}
	direct := sample{p50: 10 * time.Microsecond, throughput: 300}
	relay := sample{p50: 30 * time.Microsecond, throughput: 200}
	proxy := sample{p50: 40 * time.Microsecond, throughput: 180}
	if l, th := ratios(direct, relay, proxy); l != 1.5 || th != 0.9 {
		t.Errorf("ratios = %v, %v; want 1.5, 0.9", l, th)
	}
	// With the audit log: added 40 µs against the proxy's 30, 90/s against 180/s.
	audited := sample{p50: 50 * time.Microsecond, throughput: 90}
	if l, th, ok := auditRatios([]sample{direct, relay, proxy, audited}, time.Microsecond); !ok || l != 4.0/3 || th != 0.5 {
		t.Errorf("auditRatios = %v, %v, %v; want 1.33, 0.5, true", l, th, ok)
	}
	if _, _, ok := auditRatios([]sample{direct, relay, proxy}, time.Microsecond); ok {
		t.Error("auditRatios without a proxy+audit setup")
	}
	if got := thousands(1234567.4); got != "1,234,567" {
		t.Errorf("thousands = %q", got)
	}
}
