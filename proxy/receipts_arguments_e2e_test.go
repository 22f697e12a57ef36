//go:build unix

package proxy_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Each client frame's arguments: the receipt's arguments_json must equal
// the arguments member of the line the upstream received, byte for byte,
// and the same request's tool must be the one the receipt names.
// Found by the red team of receipts and frames (issue 26 item 2) (was TestRTReceiptArgumentsAreWhatUpstreamGot).
func TestE2EReceiptArgumentsAreWhatUpstreamGot(t *testing.T) {
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := &mcptest.Policy{AllowUnauthenticated: true, Extra: "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath +
		"\nreceipts: {include_arguments: true, include_results: true}\n"}
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Upstream: lineEchoUpstream(t, e, nil)})
	c := p.Raw()
	c.Initialize()
	deep := strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300)
	frames := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ec\u0068o","arguments":{ "a" :	1 , "b":"x\u2028y\u0000z\ufeff"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_delegateos":{"dct":""},"name":"echo","arguments":{"a":"` + "\u2028raw\u2029\u0085" + `","n":1e999999,"m":-0.0e-0}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"d":` + deep + `},"_meta":{"progressToken":1},"_DelegateOS":1}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{"s":"\ud800\udc00 \/"},"name":"echo"}}`,
		"\ufeff" + `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},"arguments":{"a":2}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":1,"\u0061":2}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"x":{"A":1,"a":2}}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"x":"` + "\xff" + `"}}}`,
	}
	got := map[string]string{}   // id → arguments the upstream received
	results := map[string]bool{} // results the client received
	for i, f := range frames {
		c.Send(f)
		id := fmt.Sprint(i + 1)
		if strings.HasPrefix(f, "\ufeff") {
			id = "null" // not JSON-RPC: answered as a parse error
		}
		m := c.Response(id)
		if m.Error != nil {
			t.Logf("frame %s refused: %d %s", id, m.Error.Code, m.Error.Message)
			continue
		}
		results[string(m.Result)] = true
		line := receivedLine(t, m)
		var r struct {
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Errorf("frame %s: upstream got unreadable %q", id, line)
			continue
		}
		if strings.Contains(strings.ToLower(line), "_delegateos") {
			t.Errorf("frame %s: _delegateos reached the upstream: %s", id, line)
		}
		t.Logf("frame %s: upstream got %s", id, line)
		got[id] = string(r.Params.Arguments)
	}
	ds, xs := receiptsOf(t, p, logPath)
	for _, x := range xs {
		if !results[x.ResultJSON] {
			t.Errorf("execution receipt result_json %.200q (omitted %q) is no result the client got", x.ResultJSON, x.ResultOmitted)
		}
	}
	allowed := 0
	for _, d := range ds {
		if d.Decision != "ALLOW" {
			continue
		}
		allowed++
		found := false
		for _, a := range got {
			if a == d.ArgumentsJSON {
				found = true
			}
		}
		if !found {
			t.Errorf("receipt arguments_json %q (omitted %q) matches no arguments the upstream received: %q", d.ArgumentsJSON, d.ArgumentsOmitted, got)
		}
	}
	if allowed != len(got) {
		t.Errorf("%d allowed receipts for %d forwarded calls", allowed, len(got))
	}
}

// Receipts over the audit writer's 1 MiB: arguments and result left out
// with a reason, the receipts themselves still written, the hashes those
// of what was forwarded and returned.
// Found by the red team of receipts and frames (issue 26 item 2) (was TestRTReceiptTooLarge).
func TestE2EReceiptTooLarge(t *testing.T) {
	for _, n := range []int{160_000, 200_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { receiptTooLarge(t, n) })
	}
}

func receiptTooLarge(t *testing.T, n int) {
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := &mcptest.Policy{AllowUnauthenticated: true, Extra: "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath +
		"\nreceipts: {include_arguments: true, include_results: true}\n"}
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Upstream: lineEchoUpstream(t, e, nil)})
	c := p.Raw()
	c.Initialize()
	args := `{"big":"` + strings.Repeat("\\u2028", n) + `"}` // escapes, which the receipt escapes again
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":` + args + `}}`)
	m := c.Response("1")
	if m.Error != nil {
		t.Fatalf("call: %+v", m.Error)
	}
	ds, xs := receiptsOf(t, p, logPath)
	if len(ds) != 1 || len(xs) != 1 {
		t.Fatalf("%d decision and %d execution receipts; want one each", len(ds), len(xs))
	}
	if ds[0].ArgumentsJSON != args && (ds[0].ArgumentsOmitted != "too_large" || ds[0].ArgumentsJSON != "") || ds[0].ArgumentsHash != "sha256:"+hexSHA([]byte(args)) {
		t.Errorf("decision receipt: omitted %q, %d bytes held, hash %s", ds[0].ArgumentsOmitted, len(ds[0].ArgumentsJSON), ds[0].ArgumentsHash)
	}
	if xs[0].ResultJSON != string(m.Result) && (xs[0].ResultOmitted != "too_large" || xs[0].ResultJSON != "") || xs[0].ResponseHash == "" {
		t.Errorf("execution receipt: omitted %q, %d bytes held, hash %s", xs[0].ResultOmitted, len(xs[0].ResultJSON), xs[0].ResponseHash)
	}
}
