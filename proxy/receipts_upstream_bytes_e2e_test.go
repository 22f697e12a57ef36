//go:build unix

package proxy_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// lineEchoUpstreamEnv makes the test binary an upstream that answers every
// request (but initialize) with a text result holding the exact line it
// received, so a test sees what the upstream got byte for byte. A method
// in the file it names gets that raw answer instead ($ID = id).
const lineEchoUpstreamEnv = "DELEGATEOS_TEST_LINE_ECHO_UPSTREAM"

func init() {
	if path := os.Getenv(lineEchoUpstreamEnv); path != "" {
		os.Exit(runLineEchoUpstream(path))
	}
}

func runLineEchoUpstream(path string) int {
	var script map[string]string
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &script)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 32<<20)
	out := bufio.NewWriter(os.Stdout)
	var notes []string // notifications received since the last answer
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			if !strings.Contains(in.Text(), `"notifications/`) {
				notes = append(notes, in.Text())
			}
			continue
		}
		switch {
		case m.Method == "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"rt","version":"0"}}}`+"\n", m.ID)
		case script[m.Method] != "":
			fmt.Fprintln(out, strings.ReplaceAll(script[m.Method], "$ID", string(m.ID)))
		default:
			line, _ := json.Marshal(strings.Join(append(notes, in.Text()), "\n"))
			notes = nil
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}`+"\n", m.ID, line)
		}
		out.Flush()
	}
	return 0
}

func lineEchoUpstream(t *testing.T, e *mcptest.Env, script map[string]string) []string {
	t.Helper()
	path := filepath.Join(e.Dir, "rt-script.json")
	mcptest.WriteFile(t, path, mcptest.MustJSON(script))
	return []string{"env", lineEchoUpstreamEnv + "=" + path, os.Args[0]}
}

// receivedLine is the line the upstream echoed in a result.
func receivedLine(t *testing.T, m mcptest.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil || len(r.Content) != 1 {
		t.Fatalf("no echoed line: %s %+v", m.Result, m.Error)
	}
	return r.Content[0].Text
}

// A vendor method's params are what the upstream acts on: with
// include_arguments the receipt must hold them (or say why not), as for a
// tool's arguments — never silently absent (issue 26 item 2).
// Found by the red team of receipts and frames (issue 26 item 2) (was TestRTVendorMethodReceiptHoldsParams).
func TestE2EReceiptVendorMethodHoldsParams(t *testing.T) {
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := &mcptest.Policy{AllowUnauthenticated: true, Extra: vendorMethods + "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath +
		"\nreceipts: {include_arguments: true, include_results: true}\n"}
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Upstream: lineEchoUpstream(t, e, nil)})
	c := p.Raw()
	c.Initialize()
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"acme/search","params":{"q":"delete everything","limit":9007199254740993}}`)
	m := c.Response("1")
	if m.Error != nil {
		t.Fatalf("acme/search: %+v", m.Error)
	}
	t.Logf("upstream got %s", receivedLine(t, m))
	ds, xs := receiptsOf(t, p, logPath)
	if len(ds) != 1 || len(xs) != 1 {
		t.Fatalf("%d decision, %d execution receipts", len(ds), len(xs))
	}
	d := ds[0]
	t.Logf("decision receipt: arguments_json %q omitted %q hash %q; execution result_json %.80q params_hash %q", d.ArgumentsJSON, d.ArgumentsOmitted, d.ArgumentsHash, xs[0].ResultJSON, xs[0].ParamsHash)
	if d.ArgumentsJSON == "" && d.ArgumentsOmitted == "" {
		t.Errorf("the vendor method's params are neither in the receipt nor marked omitted (arguments_hash %q)", d.ArgumentsHash)
	}
	if want := `{"q":"delete everything","limit":9007199254740993}`; d.ArgumentsJSON != want {
		t.Errorf("arguments_json %q, want the params as forwarded %q", d.ArgumentsJSON, want)
	}
	if sum := sha256.Sum256([]byte(d.ArgumentsJSON)); d.ArgumentsHash != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("arguments_hash %q is not the SHA-256 of arguments_json", d.ArgumentsHash)
	}
}

// completion/complete is gated (by its prompt) and forwards the
// argument value the client completes: with include_arguments, is it in
// the receipt? Logged; same class as a vendor method's params.
// Found by the red team of receipts and frames (issue 26 item 2) (was TestRTCompletionReceiptArguments).
func TestE2EReceiptCompletionArguments(t *testing.T) {
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := &mcptest.Policy{AllowUnauthenticated: true, Extra: "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath +
		"\nreceipts: {include_arguments: true, include_results: true}\n"}
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Upstream: lineEchoUpstream(t, e, nil)})
	c := p.Raw()
	c.Initialize()
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"x","value":"secret"}}}`)
	m := c.Response("1")
	t.Logf("answer %.200s %+v", m.Result, m.Error)
	ds, _ := receiptsOf(t, p, logPath)
	for _, d := range ds {
		t.Logf("decision %s %s: arguments_json %q omitted %q hash %q", d.Decision, d.Action, d.ArgumentsJSON, d.ArgumentsOmitted, d.ArgumentsHash)
		if d.Decision == "ALLOW" && d.ArgumentsJSON == "" && d.ArgumentsOmitted == "" {
			t.Errorf("completion/complete's argument is neither in the receipt nor marked omitted")
		}
		if d.Decision == "ALLOW" && !strings.Contains(d.ArgumentsJSON, `"argument":{"name":"x","value":"secret"}`) {
			t.Errorf("arguments_json %q does not hold the argument forwarded", d.ArgumentsJSON)
		}
	}
}
