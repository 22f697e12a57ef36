//go:build unix

package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
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
// answered. The next proxy starts (a daemon restarted after a crash must
// not be locked out), but only after a signed recovery checkpoint that
// marks the place, and it warns; verify names that place and fails
// unless --allow-recovered. Entries then cut from the end of the log by
// someone who restarts the proxy are reported where they were cut.
// Found by the red team of the audit log (was TestE2ERedAuditKilledProxyLogRecovered).
func TestE2EReceiptsKilledProxyLogRecovered(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	logPath := filepath.Join(e.Dir, "audit.log")
	pol, did := auditPolicy(t, e, logPath)
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
	before := readFile(t, logPath)
	first := int64(bytes.Count(before, []byte("\n")) + 1)

	restart := func(call string, n int64) {
		t.Helper()
		p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
		c := p.Raw()
		c.Initialize()
		c.Send(mcptest.CallFrame(call, "echo", map[string]any{"text": call}))
		if m := c.Response(call); m.Error != nil {
			t.Fatalf("a call through the restarted proxy: %+v", m.Error)
		}
		p.WaitLog(warnRecovered, func(m map[string]any) bool { return m["recovered_at"] == float64(n) })
		stopProxy(t, p)
	}
	restart("2", first)
	after := readFile(t, logPath)
	if !bytes.HasPrefix(after, before) {
		t.Fatal("the restarted proxy changed what the killed one had written")
	}
	want := func(n int64) string {
		return fmt.Sprintf("line %d: recovered: the log was not closed cleanly before entry %d: receipts of calls made just before may be missing, or entries were removed from its end", n, n)
	}
	out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did)
	if code == 0 || !strings.HasPrefix(out, "FAILED") || !strings.Contains(out, want(first)) {
		t.Fatalf("verify the recovered log (%d):\n%s", code, out)
	}
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did, "--allow-recovered"); code != 0 || !strings.Contains(out, want(first)) {
		t.Fatalf("verify --allow-recovered (%d):\n%s", code, out)
	}

	// Someone cuts the second session's call and final checkpoint and
	// restarts the proxy.
	lines := bytes.SplitAfter(after, []byte("\n"))
	lines = lines[:len(lines)-1]
	cut := bytes.Join(lines[:len(lines)-3], nil)
	if err := os.WriteFile(logPath, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	second := int64(len(lines) - 3 + 1)
	restart("3", second)
	// The recovery checkpoint extends the tree of what was left, but the
	// log is no extension of its copy taken before the cut.
	afterCopy := filepath.Join(e.Dir, "after-first-restart.log")
	if err := os.WriteFile(afterCopy, after, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, code := mcptest.CLI(t, "audit", "consistency", afterCopy, logPath, "--key-id", did); code != 1 || !strings.Contains(out, "not an extension") {
		t.Fatalf("audit consistency of the log cut and restarted with its earlier copy (%d):\n%s", code, out)
	}
	out, _, code = mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did, "--json")
	var rep struct {
		OK      bool
		Problem struct {
			Kind  string
			Entry int64
		}
		Report struct{ Recovered []struct{ Entry, Line int64 } }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code == 0 || rep.OK || rep.Problem.Kind != "recovered" || rep.Problem.Entry != first ||
		len(rep.Report.Recovered) != 2 || rep.Report.Recovered[0].Entry != first || rep.Report.Recovered[1].Entry != second {
		t.Fatalf("verify a log cut and restarted (%d), want recoveries at %d and %d:\n%s", code, first, second, out)
	}
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did, "--allow-recovered"); code != 0 || !strings.Contains(out, want(second)) {
		t.Fatalf("verify --allow-recovered (%d):\n%s", code, out)
	}
}

// warnRecovered is what a proxy logs when it continues an audit log that
// was not closed cleanly.
const warnRecovered = "the audit log was not closed cleanly (the proxy was killed, or entries were removed from its end): it is continued after a recovery checkpoint at entry recovered_at, and receipts of calls made before that entry may be missing ('delegateos audit verify' reports it)"

// A gated request whose target is too large for a receipt (a URI of more
// than a MiB, within the frame limit) must not reach the upstream without
// its decision receipt, nor stop the receipts of the calls after it.
// Found by the red team of the audit log (was TestE2ERedAuditHugeTargetHasReceipt).
func TestE2EReceiptsHugeTargetHasReceipt(t *testing.T) {
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
		r, err := receipt.ParseEntry(l)
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
// Found by the red team of the audit log (was TestE2ERedAuditHashesOfBytesOnTheWire).
func TestE2EReceiptsHashesOfBytesOnTheWire(t *testing.T) {
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
		r, err := receipt.ParseEntry(l)
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
