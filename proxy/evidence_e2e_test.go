//go:build unix

package proxy_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/receiptschema"
	"github.com/delegateos/delegateos/receipt"
)

// evidenceProxy starts a proxy that signs receipts into an audit log, in
// front of the docserver whose input is recorded. It returns the proxy,
// the log's path, the proxy key's did:key and the record of the upstream's
// input.
func evidenceProxy(t *testing.T, e *mcptest.Env, extra string, flags ...string) (p *mcptest.Process, logPath, did, record string) {
	t.Helper()
	key := mcptest.NewKey(t, "proxy")
	logPath = filepath.Join(e.Dir, "audit.log")
	pol := e.Policy()
	pol.Extra = "prompts:\n  - {match: summarize, namespace: docs, action: read, resource: {arg: /path}}\n" +
		"proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n" + extra
	tok := e.Mint(nil, "docs:read:/project/**", "mcp:echo:*", "mcp-resource:read:file:///project/**")
	wrap, record := recordUpstream(t, e)
	p = e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok, Wrap: wrap, Flags: flags})
	return p, logPath, key.DID(), record
}

// stopProxy closes the proxy's input and waits for it to exit.
func stopProxy(t *testing.T, p *mcptest.Process) {
	t.Helper()
	p.Stdin.Close()
	if !p.WaitExit(20 * time.Second) {
		t.Fatal("the proxy did not exit after its input closed")
	}
}

// logReceipts parses every line of an audit log.
func logReceipts(t *testing.T, path string) ([]*receipt.Receipt, [][]byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rs []*receipt.Receipt
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines = lines[:len(lines)-1]
	for i, l := range lines {
		r, err := receipt.ParseEntry(bytes.TrimSuffix(l, []byte("\n")))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		rs = append(rs, r)
	}
	return rs, lines
}

func hexSHA(b []byte) string {
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

// Every kind of gated request, allowed and refused, leaves a signed
// decision receipt; every forwarded one an execution receipt holding the
// hashes of the request as forwarded and the response as returned; the
// log verifies under the proxy's key and not under another; arguments
// are not in it.
func TestE2EEvidenceEveryRequestKind(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	p, logPath, did, record := evidenceProxy(t, e, "")
	c := p.Raw()
	c.Initialize()
	type req struct {
		id, frame, method, target string
		allowed                   bool
	}
	reqs := []req{
		{"1", mcptest.CallFrame("1", "echo", map[string]any{"text": "confidential-argument"}), "tools/call", "echo", true},
		{"2", mcptest.CallFrame("2", "write_file", map[string]any{"path": "/project/x.md", "content": "confidential-argument"}), "tools/call", "write_file", false},
		{"3", `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///project/README.md"}}`, "resources/read", "file:///project/README.md", true},
		{"4", `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}`, "resources/read", "file:///etc/passwd", false},
		{"5", `{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"file:///etc/passwd"}}`, "resources/subscribe", "file:///etc/passwd", false},
		{`"6"`, `{"jsonrpc":"2.0","id":"6","method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"resourceSubscriptions":["file:///etc/passwd"]}}}`, "subscriptions/listen", "file:///etc/passwd", false},
		{"7", `{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"summarize","arguments":{"path":"/project/README.md"}}}`, "prompts/get", "summarize", true},
		{"8", `{"jsonrpc":"2.0","id":8,"method":"prompts/get","params":{"name":"summarize","arguments":{"path":"/etc/passwd"}}}`, "prompts/get", "summarize", false},
		{"9", `{"jsonrpc":"2.0","id":9,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"summarize"},"argument":{"name":"path","value":"/"}}}`, "completion/complete", "summarize", false},
		{"10", `{"jsonrpc":"2.0","id":10,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///project/README.md"},"argument":{"name":"x","value":"y"}}}`, "completion/complete", "file:///project/README.md", true},
	}
	responses := map[string][]byte{}
	for _, r := range reqs {
		c.Send(r.frame)
		line := c.NextLine()
		var m mcptest.RawMessage
		if err := json.Unmarshal(line, &m); err != nil || string(m.ID) != r.id {
			t.Fatalf("request %s answered %s", r.id, line)
		}
		if (m.Error == nil || m.Error.Code != -32001) != r.allowed {
			t.Fatalf("request %s (%s %s): allowed should be %v, got %s", r.id, r.method, r.target, r.allowed, line)
		}
		if r.allowed {
			responses[r.target+r.method] = line
		}
	}
	forwarded := recordedThrough(t, record, `"method":"completion/complete"`, 1)
	stopProxy(t, p)

	out, stderr, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did)
	if code != 0 || !strings.HasPrefix(out, "OK audit log") {
		t.Fatalf("audit verify: %d %s %s", code, out, stderr)
	}
	other := mcptest.NewKey(t, "other").DID()
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", other); code != 1 || !strings.Contains(out, "untrusted") {
		t.Fatalf("audit verify under another key: %d %s", code, out)
	}

	rs, lines := logReceipts(t, logPath)
	for i, l := range lines {
		if err := receiptschema.Validate(bytes.TrimSuffix(l, []byte("\n"))); err != nil {
			t.Errorf("line %d does not match its schema (docs/schemas): %v", i+1, err)
		}
	}
	if bytes.Contains(bytes.Join(lines, nil), []byte("confidential-argument")) {
		t.Error("arguments are in the audit log in clear")
	}
	decisions := map[string]*receipt.DecisionBody{}
	digests := map[string]*receipt.DecisionBody{}
	var executions []*receipt.ExecutionBody
	for _, r := range rs {
		switch b := r.Body.(type) {
		case *receipt.DecisionBody:
			decisions[b.Resource+b.Method+b.Decision] = b
			digests[r.Digest] = b
		case *receipt.ExecutionBody:
			executions = append(executions, b)
		}
	}
	for _, r := range reqs {
		want := receipt.DecisionBlock
		if r.allowed {
			want = receipt.DecisionAllow
		}
		d := decisions[r.target+r.method+want]
		if d == nil {
			t.Errorf("no %s decision receipt for %s %s", want, r.method, r.target)
			continue
		}
		if d.Action != receipt.Action(r.method) || d.PolicyContextHash == "" || !strings.HasPrefix(d.PayloadHash, "sha256:") {
			t.Errorf("decision for %s %s: %+v", r.method, r.target, d)
		}
		if len(d.Chain) != 1 || len(d.DelegationPath) != 1 || !strings.HasPrefix(d.AgentDID, "did:key:z") {
			t.Errorf("decision for %s %s names no chain or agent: %+v", r.method, r.target, d)
		}
		if !r.allowed && (d.DenialType != "capability_not_granted" || d.Capability == nil) {
			t.Errorf("refusal of %s %s: %+v", r.method, r.target, d)
		}
	}
	// One execution receipt per allowed request, linked to its decision,
	// with the hashes of exactly what was forwarded and returned.
	if len(executions) != 4 {
		t.Fatalf("%d execution receipts, want 4", len(executions))
	}
	forwardedHashes := map[string]bool{}
	for _, f := range forwarded {
		forwardedHashes["sha256:"+hexSHA([]byte(f))] = true
	}
	for _, x := range executions {
		d := digests[x.DecisionReceiptHash]
		if d == nil || d.AuditID != x.GateAuditID {
			t.Errorf("execution receipt %s does not name its decision", x.ReceiptID)
			continue
		}
		if !forwardedHashes[x.RequestHash] {
			t.Errorf("%s %s: request_hash %s is not the hash of any frame the upstream received", x.Operation, x.Resource, x.RequestHash)
		}
		if got := responses[x.Resource+x.Operation]; x.ResponseHash != "sha256:"+hexSHA(got) {
			t.Errorf("%s %s: response_hash %s is not the hash of the response returned (%s)", x.Operation, x.Resource, x.ResponseHash, got)
		}
	}
	// The log ends with the checkpoint written at shutdown, whose digest
	// the proxy's own log names.
	if last, ok := rs[len(rs)-1].Body.(*receipt.CheckpointBody); !ok || !last.Final || last.Length != int64(len(rs)-1) {
		t.Fatalf("last entry %s", lines[len(lines)-1])
	}
	closed := p.WaitLog("audit log closed", nil)
	if closed["head"] != rs[len(rs)-1].Digest || closed["entries"] != float64(len(rs)) {
		t.Fatalf("audit log closed %v; the last entry's digest is %s", closed, rs[len(rs)-1].Digest)
	}
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did, "--head", rs[len(rs)-1].Digest); code != 0 {
		t.Fatalf("verify --head: %s", out)
	}
}

// The policy may put arguments and results into the receipts in clear.
func TestE2EEvidenceIncludeArguments(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	p, logPath, _, _ := evidenceProxy(t, e, "receipts: {include_arguments: true, include_results: true}\n")
	c := p.Raw()
	c.Initialize()
	c.Send(mcptest.CallFrame("1", "echo", map[string]any{"text": "shown-argument"}))
	c.Response("1")
	stopProxy(t, p)
	_, lines := logReceipts(t, logPath)
	all := bytes.Join(lines, nil)
	if !bytes.Contains(all, []byte(`"arguments_json":"{\"text\":\"shown-argument\"}"`)) || !bytes.Contains(all, []byte(`"result_json":"{`)) {
		t.Fatalf("arguments or result missing from the receipts:\n%s", all)
	}
}

// Tampering with the log the real proxy wrote is named by audit verify:
// an edited field, a swap, an insertion, a removal and a truncation; an
// export of one receipt verifies alone.
func TestE2EEvidenceTamperingNamed(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	p, logPath, did, _ := evidenceProxy(t, e, "")
	c := p.Raw()
	c.Initialize()
	for i := range 4 {
		id := string(rune('1' + i))
		c.Send(mcptest.CallFrame(id, "echo", map[string]any{"text": "t"}))
		c.Response(id)
	}
	stopProxy(t, p)
	_, lines := logReceipts(t, logPath)
	// 4 decisions, 4 executions, the final checkpoint; and another
	// checkpoint wherever a second passed (the writer's clock), which a
	// slow machine can reach.
	n := len(lines)
	kinds := map[string]int{}
	for _, l := range lines {
		var m struct {
			Kind string `json:"schema_version"`
		}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		kinds[m.Kind]++
	}
	if kinds[receipt.KindDecision] != 4 || kinds[receipt.KindExecution] != 4 || !bytes.Contains(lines[n-1], []byte(`"final":true`)) {
		t.Fatalf("entries by kind %v (the last %s), want 4 decisions, 4 executions and a final checkpoint", kinds, lines[n-1])
	}
	// The entry edited: the first decision from the third entry on.
	ed := 2
	for !bytes.Contains(lines[ed], []byte(`"cost_reserved":`)) {
		ed++
	}
	write := func(name string, parts ...[]byte) string {
		path := filepath.Join(e.Dir, name)
		mcptest.WriteFile(t, path, string(bytes.Join(parts, nil)))
		return path
	}
	cat := func(ls [][]byte) []byte { return bytes.Join(ls, nil) }
	edited := bytes.Replace(lines[ed], []byte(`"cost_reserved":0`), []byte(`"cost_reserved":1`), 1)
	if bytes.Equal(edited, lines[ed]) {
		t.Fatalf("entry %d has no cost_reserved of 0: %s", ed+1, lines[ed])
	}
	cases := []struct {
		name, path, want string
	}{
		{"edited", write("edited.log", cat(lines[:ed]), edited, cat(lines[ed+1:])), fmt.Sprintf("line %d: edited", ed+1)},
		{"swapped", write("swapped.log", cat(lines[:3]), lines[4], lines[3], cat(lines[5:])), "line 4: reordered: entries 4 and 5 are swapped"},
		{"inserted", write("inserted.log", cat(lines[:5]), lines[1], cat(lines[5:])), "line 6: inserted"},
		{"removed", write("removed.log", cat(lines[:5]), cat(lines[6:])), "line 6: removed: entry 6 was removed"},
		{"truncated", write("truncated.log", cat(lines[:n-2])), "truncated"},
	}
	for _, c := range cases {
		out, _, code := mcptest.CLI(t, "audit", "verify", c.path, "--key-id", did)
		if code != 1 || !strings.Contains(out, c.want) {
			t.Errorf("%s: audit verify said (%d) %s; want %q", c.name, code, out, c.want)
		}
	}
	// Every member of a decision, an execution and the checkpoint, changed
	// in turn (and the entry kept canonical): verify names the entry.
	for _, i := range []int{0, 1, n - 1} {
		var m map[string]any
		if err := json.Unmarshal(lines[i], &m); err != nil {
			t.Fatal(err)
		}
		for key, v := range m {
			changed := maps.Clone(m)
			changed[key] = changeValue(v)
			b, err := canon.Marshal(changed)
			if err != nil {
				t.Fatal(err)
			}
			path := write("member.log", cat(lines[:i]), b, []byte("\n"), cat(lines[i+1:]))
			want := fmt.Sprintf("line %d: edited", i+1)
			if out, _, code := mcptest.CLI(t, "audit", "verify", path, "--key-id", did); code != 1 || !strings.Contains(out, want) {
				t.Errorf("line %d, %s changed: audit verify said (%d) %s; want %q", i+1, key, code, out, want)
			}
		}
	}
	export := filepath.Join(e.Dir, "receipt-3.jsonl")
	if _, stderr, code := mcptest.CLI(t, "audit", "export", logPath, "--receipt", "3", "--out", export); code != 0 {
		t.Fatalf("audit export: %s", stderr)
	}
	if out, _, code := mcptest.CLI(t, "audit", "verify", export, "--key-id", did); code != 0 || !strings.Contains(out, "export of receipt 3") {
		t.Fatalf("audit verify of the export: %d %s", code, out)
	}
	out, _, code := mcptest.CLI(t, "audit", "show", logPath)
	if code != 0 || strings.Count(out, "decision   ALLOW tools/call echo") != 4 || !strings.Contains(out, "(final)") {
		t.Fatalf("audit show: %s", out)
	}
}

// changeValue returns v changed: a string's last character, a number
// plus one, a boolean negated, a list or object with one member changed.
func changeValue(v any) any {
	switch v := v.(type) {
	case string:
		if v == "" {
			return "x"
		}
		last := v[len(v)-1]
		if last == '0' {
			return v[:len(v)-1] + "1"
		}
		return v[:len(v)-1] + "0"
	case float64:
		return v + 1
	case bool:
		return !v
	case []any:
		return append([]any{changeValue(v[0])}, v[1:]...)
	case map[string]any:
		out := maps.Clone(v)
		for k := range out {
			out[k] = changeValue(out[k])
			break
		}
		return out
	}
	return "x"
}

// A second proxy on the same audit log refuses to start and leaves the
// log as it was; the first one's log still verifies.
func TestE2EEvidenceSecondProxyRefused(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	p, logPath, did, _ := evidenceProxy(t, e, "")
	c := p.Raw()
	c.Initialize()
	c.Send(mcptest.CallFrame("1", "echo", map[string]any{"text": "t"}))
	c.Response("1")
	key := filepath.Join(e.Dir, "key2")
	if _, stderr, code := mcptest.CLI(t, "keygen", "--out", key); code != 0 {
		t.Fatal(stderr)
	}
	pol := e.Policy()
	pol.Extra = "proxy_key: " + key + "\naudit_log: " + logPath + "\n"
	second := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: e.Mint(nil, "mcp:echo:*"), LogToStderr: true, WantExit: func(code int) bool { return code == 2 }})
	if !second.WaitExit(20 * time.Second) {
		t.Fatal("the second proxy started on a log in use")
	}
	stopProxy(t, p)
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", did); code != 0 {
		t.Fatalf("the first proxy's log: %s", out)
	}
}

// An audit log without a key is refused at start-up.
func TestE2EEvidenceNeedsAKey(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	pol := e.Policy()
	pol.Extra = "audit_log: " + filepath.Join(e.Dir, "audit.log") + "\n"
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: e.Mint(nil, "mcp:echo:*"), LogToStderr: true, WantExit: func(code int) bool { return code == 2 }})
	if !p.WaitExit(20 * time.Second) {
		t.Fatal("the proxy started with an audit log and no key")
	}
	if _, err := os.Stat(filepath.Join(e.Dir, "audit.log")); !os.IsNotExist(err) {
		t.Fatalf("an audit log was created: %v", err)
	}
}

// A proxy stopped by SIGTERM with a call in flight still closes its audit
// log: the call's execution receipt and the final checkpoint are written,
// and the log verifies.
func TestE2EEvidenceSIGTERM(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "proxy")
	logPath := filepath.Join(e.Dir, "audit.log")
	pol := e.Policy()
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: e.Mint(nil, "mcp:echo:*", "mcp:slow:*"), WantExit: func(code int) bool { return code >= 0 }})
	c := p.Raw()
	c.Initialize()
	c.Send(mcptest.CallFrame("1", "echo", map[string]any{"text": "x"}))
	c.Response("1")
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"steps":1000,"delay_ms":20},"_meta":{"progressToken":"p"}}}`)
	if m := c.Next(); m.Method != "notifications/progress" {
		t.Fatalf("the slow call did not start: %+v", m)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !p.WaitExit(20 * time.Second) {
		t.Fatal("the proxy did not exit after SIGTERM")
	}
	if out, _, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", key.DID()); code != 0 {
		t.Fatalf("audit verify after SIGTERM: %s", out)
	}
	rs, _ := logReceipts(t, logPath)
	var slow *receipt.ExecutionBody
	for _, r := range rs {
		if x, ok := r.Body.(*receipt.ExecutionBody); ok && x.Resource == "slow" {
			slow = x
		}
	}
	// The upstream answers the cancelled call with an error, or exits
	// before answering it.
	if slow == nil || !(slow.Status == receipt.StatusFailed && slow.Outcome == "error" && slow.ResponseHash != "" ||
		slow.Status == receipt.StatusUnanswered && slow.ResponseHash == "") {
		t.Fatalf("the slow call's execution receipt: %+v", slow)
	}
}
