//go:build unix

package proxy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/receipt"
)

// auditPolicy is a policy that signs receipts into logPath with a new
// proxy key.
func auditPolicy(t *testing.T, e *mcptest.Env, logPath string) (*mcptest.Policy, string) {
	t.Helper()
	key := mcptest.NewKey(t, "proxy")
	pol := e.Policy()
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	return pol, key.DID()
}

// A proxy killed with SIGKILL leaves its audit log without a final
// checkpoint, and may have lost the receipts of calls it had already
// answered. The next proxy must not continue that log: its entries would
// follow the last one written, close with a final checkpoint, and the
// log would verify whole, with nothing to show that receipts are missing
// (nor that entries were cut from its end before the restart).
func TestE2ERedAuditKilledProxyLogNotContinued(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	logPath := filepath.Join(e.Dir, "audit.log")
	pol, _ := auditPolicy(t, e, logPath)
	tok := e.Mint(nil, "mcp:echo:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok, WantExit: func(code int) bool { return code == -1 }})
	c := p.Raw()
	c.Initialize()
	c.Send(mcptest.CallFrame("1", "echo", map[string]any{"text": "t"}))
	c.Response("1")
	mcptest.Eventually(t, "the call's two receipts to be written", func() bool {
		b, _ := os.ReadFile(logPath)
		return bytes.Count(b, []byte("\n")) >= 2
	})
	pid := p.UpstreamPID()
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	if !p.WaitExit(10 * time.Second) {
		t.Fatal("the killed proxy did not exit")
	}
	before, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	second := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok, LogToStderr: true, WantExit: func(code int) bool { return code == 2 }})
	if !second.WaitExit(20 * time.Second) {
		second.Stdin.Close()
		second.WaitExit(20 * time.Second)
		after, _ := os.ReadFile(logPath)
		out, _, code := mcptest.CLI(t, "audit", "verify", logPath)
		t.Fatalf("a proxy continued the audit log of a killed proxy (%d bytes before, %d after; verify: %d %s)", len(before), len(after), code, out)
	}
	if after, _ := os.ReadFile(logPath); !bytes.Equal(after, before) {
		t.Fatal("the refused proxy changed the log")
	}
}

// A gated request whose target is too large for a receipt (a URI of more
// than a MiB, within the frame limit) must not reach the upstream without
// its decision receipt, nor stop the receipts of the calls after it.
func TestE2ERedAuditHugeTargetHasReceipt(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	logPath := filepath.Join(e.Dir, "audit.log")
	pol, did := auditPolicy(t, e, logPath)
	tok := e.Mint(nil, "mcp:echo:*", "mcp-resource:read:file:///project/**")
	wrap, record := recordUpstream(t, e)
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok, Wrap: wrap})
	c := p.Raw()
	c.Initialize()
	uri := "file:///project/" + strings.Repeat("a", 1200<<10)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + uri + `"}}`)
	c.Response("1")
	c.Send(mcptest.CallFrame("2", "echo", map[string]any{"text": "after"}))
	if m := c.Response("2"); m.Error != nil {
		t.Errorf("the call after the large one: %+v", m.Error)
	}
	recordedThrough(t, record, `"method":"tools/call"`, 1)
	stopProxy(t, p)
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did); code != 0 {
		t.Errorf("audit verify: %s", out)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		r, err := receipt.Parse(l)
		if err != nil {
			continue
		}
		if d, ok := r.Body.(*receipt.DecisionBody); ok && d.Method == "resources/read" {
			reads++
		}
	}
	if upstreamSaw := bytes.Contains(readFile(t, record), []byte(`"method":"resources/read"`)); upstreamSaw && reads == 0 {
		t.Error("the resources/read reached the upstream without a decision receipt")
	}
	if reads != 1 {
		t.Errorf("%d decision receipts of the resources/read; want 1", reads)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The hashes in an execution receipt are of the bytes that went out: the
// request as the upstream read it (its id replaced, params._delegateos cut
// out, whatever order the members are in) and the response as the client
// read it (its id restored).
func TestE2ERedAuditHashesOfBytesOnTheWire(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	logPath := filepath.Join(e.Dir, "audit.log")
	pol, _ := auditPolicy(t, e, logPath)
	tok := e.Mint(nil, "mcp:echo:*")
	wrap, record := recordUpstream(t, e)
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Wrap: wrap})
	c := p.Raw()
	c.Initialize()
	c.Send(`{"params":{"_delegateos":{"dct":` + mcptest.MustJSON(tok.String()) + `},"name":"echo","arguments":{"text":"x"}},"method":"tools/call","jsonrpc":"2.0","id":"late-id"}`)
	line := c.NextLine()
	if !bytes.Contains(line, []byte(`"late-id"`)) || bytes.Contains(line, []byte(`"error"`)) {
		t.Fatalf("answer: %s", line)
	}
	frames := recordedThrough(t, record, `"method":"tools/call"`, 1)
	stopProxy(t, p)
	var upstream string
	for _, f := range frames {
		if strings.Contains(f, `"method":"tools/call"`) {
			upstream = f
		}
	}
	b := readFile(t, logPath)
	var x *receipt.ExecutionBody
	for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		r, err := receipt.Parse(l)
		if err != nil {
			t.Fatal(err)
		}
		if eb, ok := r.Body.(*receipt.ExecutionBody); ok {
			x = eb
		}
	}
	if x == nil {
		t.Fatal("no execution receipt")
	}
	if want := "sha256:" + hexSHA([]byte(upstream)); x.RequestHash != want {
		t.Errorf("request_hash %s; the upstream read %s (%s)", x.RequestHash, upstream, want)
	}
	if want := "sha256:" + hexSHA(line); x.ResponseHash != want {
		t.Errorf("response_hash %s; the client read %s (%s)", x.ResponseHash, line, want)
	}
}
