package gate

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
)

// The rate_limited error of docs/policy.md is what the gate answers for the policy
// it shows, ten write_* calls into a minute, 18.8 seconds after the first.
func TestREADMERateLimitedError(t *testing.T) {
	b, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## Rate limits\n")
	_, rest, ok2 := strings.Cut(rest, "```json\n")
	block, _, ok3 := strings.Cut(rest, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no json block under ## Rate limits in docs/policy.md")
	}
	var want any
	if err := json.Unmarshal([]byte(block), &want); err != nil {
		t.Fatalf("the README's error is not JSON: %v\n%s", err, block)
	}

	f := newRateFixtureFor(t, `tools:
  - match: "write_*"
    namespace: docs
    action: write
    resource: {arg: /path}
    rate: 10/1m
`, "del_3f2a9c1b7e4d", dct.Capability{Namespace: "docs", Action: "*", Resource: "/project/**"})
	write := CallRequest{Tool: "write_file", Arguments: json.RawMessage(`{"path":"/project/x.md"}`), Token: f.root}
	for range 10 {
		wantAllowed(t, f.call(t, write), "write_file within the rate")
	}
	f.advance(18800 * time.Millisecond)
	d := f.call(t, write)
	wantLimited(t, d, "the eleventh", 41200)
	// The JSON-RPC error a front answers a denial with (the relay's
	// replyError).
	type errorBody struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	out, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errorBody       `json:"error"`
	}{JSONRPC: "2.0", ID: []byte("7"), Error: errorBody{Code: DenialCode, Message: d.Denial.Message(), Data: d.Denial}})
	if err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the gate answers\n%s\nthe README shows\n%s", out, block)
	}
}
