//go:build unix

package proxy_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/receiptschema"
	"github.com/delegateos/delegateos/receipt"
)

// exactReceiptsProxy starts a proxy whose receipts include arguments and
// results, in front of an upstream answering tools/call with call.
func exactReceiptsProxy(t *testing.T, call string) (*mcptest.Raw, *mcptest.Process, string) {
	t.Helper()
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	up := scriptedUpstream(t, e, map[string]string{"tools/call": `{"jsonrpc":"2.0","id":$ID,"result":` + call + `}`})
	pol := &mcptest.Policy{AllowUnauthenticated: true, Extra: "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath +
		"\nreceipts: {include_arguments: true, include_results: true}\n"}
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Upstream: up})
	c := p.Raw()
	c.Initialize()
	return c, p, logPath
}

// receiptsOf stops the proxy, checks its log against the schemas and
// returns its decision and execution receipts.
func receiptsOf(t *testing.T, p *mcptest.Process, logPath string) ([]*receipt.DecisionBody, []*receipt.ExecutionBody) {
	t.Helper()
	stopProxy(t, p)
	rs, lines := logReceipts(t, logPath)
	for i, l := range lines {
		if err := receiptschema.Validate(bytes.TrimSuffix(l, []byte("\n"))); err != nil {
			t.Errorf("line %d does not match its schema (docs/schemas): %v", i+1, err)
		}
	}
	var ds []*receipt.DecisionBody
	var xs []*receipt.ExecutionBody
	for _, r := range rs {
		switch b := r.Body.(type) {
		case *receipt.DecisionBody:
			ds = append(ds, b)
		case *receipt.ExecutionBody:
			xs = append(xs, b)
		}
	}
	return ds, xs
}

// Arguments and a result that canonical JSON cannot hold exactly (a
// number past 2^53, one past float64's range, a lone surrogate) were
// rounded in the receipts, or left out of them without a word. Now the
// receipt holds the JSON text exactly as forwarded and as returned: its
// SHA-256 is the receipt's own hash of it.
func TestE2EReceiptsHoldExactlyWhatWasForwarded(t *testing.T) {
	t.Parallel()
	const args = `{"n":9007199254740993,"big":1e400,"s":"\ud800","t":"x\u2028y","f":1.50}`
	const result = `{"content":[{"type":"text","text":"ok"}],"structuredContent":{"n":9007199254740993,"big":-1e400,"s":"\udfff"}}`
	c, p, logPath := exactReceiptsProxy(t, result)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":` + args + `}}`)
	m := c.Response("1")
	if m.Error != nil || string(m.Result) != result {
		t.Fatalf("call answered %s %+v; want the result relayed as it is", m.Result, m.Error)
	}
	ds, xs := receiptsOf(t, p, logPath)
	if len(ds) != 1 || len(xs) != 1 {
		t.Fatalf("%d decision and %d execution receipts, want one each", len(ds), len(xs))
	}
	d, x := ds[0], xs[0]
	if d.ArgumentsJSON != args || d.ArgumentsOmitted != "" || d.Arguments != nil {
		t.Errorf("the decision receipt holds arguments_json %q (omitted %q, arguments %s); want exactly %q", d.ArgumentsJSON, d.ArgumentsOmitted, d.Arguments, args)
	}
	if d.ArgumentsHash != "sha256:"+hexSHA([]byte(d.ArgumentsJSON)) {
		t.Errorf("arguments_hash %s is not the SHA-256 of arguments_json", d.ArgumentsHash)
	}
	if x.ResultJSON != result || x.ResultOmitted != "" || x.Result != nil {
		t.Errorf("the execution receipt holds result_json %q (omitted %q, result %s); want exactly %q", x.ResultJSON, x.ResultOmitted, x.Result, result)
	}
}

// A result that gives a member twice is read one way by one client and
// the other way by another: the gate refuses that from a client, and it
// was relayed from the upstream as it was, with a receipt holding no
// result. Now the client gets a JSON-RPC error naming the member, the call
// is charged (the upstream may have done the work), and its execution
// receipt says the answer was not relayed.
func TestE2EReceiptsUpstreamRepeatedMemberRefused(t *testing.T) {
	t.Parallel()
	for name, result := range map[string]string{
		"top":     `{"content":[{"type":"text","text":"ok"}],"isError":false,"isError":true}`,
		"nested":  `{"content":[{"type":"text","text":"ok","text":"rm -rf /"}]}`,
		"escaped": `{"content":[],"structuredContent":{"to":"alice","t\u006f":"mallory"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, p, logPath := exactReceiptsProxy(t, result)
			c.Send(mcptest.CallFrame("1", "echo", map[string]any{"text": "a"}))
			m := c.Response("1")
			if m.Error == nil || m.Error.Code != -32603 || !strings.Contains(m.Error.Message, "gives the member") || !strings.Contains(m.Error.Message, "twice") {
				t.Fatalf("a result giving a member twice was answered %s %+v; want a JSON-RPC error naming the member", m.Result, m.Error)
			}
			_, xs := receiptsOf(t, p, logPath)
			if len(xs) != 1 || xs[0].Outcome != "unreadable" || xs[0].Status != receipt.StatusFailed || xs[0].ResultJSON != "" || xs[0].ResponseHash != "" {
				t.Fatalf("execution receipts %+v; want one, unreadable and FAILED, with no result", xs)
			}
		})
	}
}
