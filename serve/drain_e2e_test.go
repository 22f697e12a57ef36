package serve_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/receipt"
)

// A call still in flight when --drain-timeout runs out is settled as
// charged, and its receipts are in the audit log, which verifies, before
// the server exits.
func TestServeDrainTimeoutSettlesAndSigns(t *testing.T) {
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "server")
	logPath := filepath.Join(e.Dir, "audit.log")
	store := filepath.Join(e.Dir, "spend.json")
	pol := e.Policy(mcptest.Priced("slow", 700))
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--spend-store", store, "--drain-timeout", "200ms"}})
	tok := e.Mint(mcptest.Budget(10000), "mcp:slow:*")
	sid := srv.Initialize(mcptest.Bearer(tok))
	st := srv.PostStream(sid, mcptest.Bearer(tok), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"steps":300,"delay_ms":100},"_meta":{"progressToken":1}}}`)
	if m := st.Next(); m["method"] != "notifications/progress" {
		t.Fatalf("first message %v, want progress", m)
	}
	srv.Signal(syscall.SIGTERM)
	var last map[string]any
	for m := st.Next(); m != nil; m = st.Next() {
		last = m
	}
	if last == nil || last["error"] == nil {
		t.Fatalf("the call cut off by the drain ended with %v", last)
	}
	if !srv.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("serve did not exit")
	}
	out, _, code := mcptest.CLI(t, "spend", "--store", store, "--json")
	if code != 0 || !strings.Contains(out, `"committed": 700`) {
		t.Fatalf("spend after the drain (exit %d): %s\n%s", code, out, srv.Log())
	}
	out, stderr, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", key.DID())
	if code != 0 || !strings.HasPrefix(out, "OK audit log") {
		t.Fatalf("audit verify: %d %s %s", code, out, stderr)
	}
	count := receiptCounts(t, logPath)
	if count[receipt.DecisionAllow] != 1 || count["execution"] != 1 {
		t.Errorf("receipts in the log: %v, want the call's decision and its execution", count)
	}
}

// Ending a session with DELETE while a priced call is in flight does not
// make the call free: it is settled as a cancellation is, charged what it
// reserved (the upstream may have done the work).
func TestServeDeleteWithACallInFlightCharges(t *testing.T) {
	e := mcptest.NewEnv(t)
	store := filepath.Join(e.Dir, "spend.json")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(mcptest.Priced("slow", 700)), Flags: []string{"--spend-store", store}})
	tok := e.Mint(mcptest.Budget(10000), "mcp:slow:*")
	hdr := mcptest.Bearer(tok)
	sid := srv.Initialize(hdr)
	st := srv.PostStream(sid, hdr, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"steps":300,"delay_ms":100},"_meta":{"progressToken":1}}}`)
	if m := st.Next(); m["method"] != "notifications/progress" {
		t.Fatalf("first message %v, want progress", m)
	}
	if r := srv.Do(http.MethodDelete, "/mcp", map[string]string{"Mcp-Session-Id": sid, "Authorization": hdr["Authorization"]}, ""); r.Status != 204 {
		t.Fatalf("DELETE: HTTP %d", r.Status)
	}
	var last map[string]any
	for m := st.Next(); m != nil; m = st.Next() {
		last = m
	}
	if last == nil || last["error"] == nil {
		t.Fatalf("the call cut off by DELETE ended with %v", last)
	}
	srv.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "slow" })
	out, _, code := mcptest.CLI(t, "spend", "--store", store, "--json")
	if code != 0 || !strings.Contains(out, `"committed": 700`) {
		t.Fatalf("spend after DELETE (exit %d): %s", code, out)
	}
}

// receiptCounts reads the audit log at path and counts its decision
// receipts by decision, and its execution receipts as "execution".
func receiptCounts(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		r, err := receipt.ParseEntry(line)
		if err != nil {
			t.Fatal(err)
		}
		switch body := r.Body.(type) {
		case *receipt.DecisionBody:
			count[body.Decision]++
		case *receipt.ExecutionBody:
			count["execution"]++
		}
	}
	return count
}
