//go:build unix

package serve_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// reloadServer is delegateos serve with --policy on a file the test
// rewrites, a spend store, an audit log and --metrics-listen, where POST
// /reload is.
type reloadServer struct {
	*mcptest.Server
	e                                *mcptest.Env
	policyPath, spendPath, auditPath string
	keyFile, keyDID, metricsBase     string
}

func (r *reloadServer) policy(echoNS string, cost int64, extra string, rules ...mcptest.Rule) string {
	pol := r.e.Policy(append([]mcptest.Rule{{Match: "echo", Namespace: echoNS, Action: "echo", Cost: cost}}, rules...)...)
	pol.SpendStore = r.spendPath
	pol.Extra = "proxy_key: " + r.keyFile + "\naudit_log: " + r.auditPath + "\n" + extra
	return pol.YAML()
}

func startReloadServer(t *testing.T) *reloadServer {
	t.Helper()
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "server")
	r := &reloadServer{e: e, policyPath: filepath.Join(e.Dir, "reload-policy.yaml"),
		spendPath: filepath.Join(e.Dir, "spend.db"), auditPath: filepath.Join(e.Dir, "audit.log"),
		keyFile: e.KeyFile(key), keyDID: key.DID()}
	mcptest.WriteFile(t, r.policyPath, r.policy("mcp", 1, ""))
	r.Server = e.StartServe(mcptest.ServeOptions{Flags: []string{"--policy", r.policyPath, "--metrics-listen", "127.0.0.1:0"}})
	line := r.WaitLog("serving metrics", nil)
	r.metricsBase = "http://" + line["address"].(string)
	return r
}

// reload POSTs /reload to the metrics listener and returns the status and
// the decoded answer. It may run on any goroutine.
func (r *reloadServer) reload() (int, map[string]any, error) {
	res, err := http.Post(r.metricsBase+"/reload", "application/json", nil)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(b, &m); err != nil {
		return res.StatusCode, nil, fmt.Errorf("answer %q: %v", b, err)
	}
	return res.StatusCode, m, nil
}

// call makes one tools/call of echo in session sid; it may run on any
// goroutine. It returns whether the call was allowed.
func (r *reloadServer) call(sid, tok, id string) (bool, error) {
	req, err := http.NewRequest(http.MethodPost, r.URL, strings.NewReader(mcptest.CallBody(`"`+id+`"`, "echo", map[string]any{"text": id})))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := (&http.Client{Timeout: mcptest.CallTimeout}).Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return false, err
	}
	hr := &mcptest.HTTPResponse{Status: res.StatusCode, Header: res.Header, Body: b}
	for _, m := range hr.Messages() {
		if m["id"] != id {
			continue
		}
		if _, ok := m["result"]; ok {
			return true, nil
		}
		return false, nil
	}
	return false, fmt.Errorf("call %s: HTTP %d without its answer: %s", id, res.StatusCode, b)
}

// listsEcho reports whether tools/list in session sid shows echo.
func (r *reloadServer) listsEcho(t *testing.T, sid string, hdr map[string]string) bool {
	t.Helper()
	res := r.Post(sid, hdr, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
	for _, m := range res.Messages() {
		if m["id"] == "list" {
			return strings.Contains(mcptest.JSON(m["result"]), `"name":"echo"`)
		}
	}
	t.Fatalf("tools/list: HTTP %d %s", res.Status, res.Body)
	return false
}

// POST /reload on the metrics listener applies the policy file again: a
// session opened before sees its next list filtered, and its next call
// decided, by the new policy. A policy that does not load is refused with
// 409 and why, and the one in force stays. SIGHUP does the same as POST
// /reload; the MCP endpoint's listener has no /reload. Before reload,
// SIGHUP ended the server.
func TestServeReloadEndpointAndSignal(t *testing.T) {
	t.Parallel()
	r := startReloadServer(t)
	tok := r.e.Mint(nil, "mcp:echo:*")
	hdr := mcptest.Bearer(tok)
	sid := r.Initialize(hdr)
	if ok, err := r.call(sid, tok.String(), "before"); !ok || err != nil {
		t.Fatalf("echo before the reload: %v %v", ok, err)
	}
	if !r.listsEcho(t, sid, hdr) {
		t.Fatal("echo not listed before the reload")
	}
	if res := r.Do(http.MethodPost, "/reload", hdr, ""); res.Status == http.StatusOK {
		t.Fatalf("POST /reload on the MCP listener: HTTP %d", res.Status)
	}
	mcptest.WriteFile(t, r.policyPath, "tools: [\n")
	code, ans, err := r.reload()
	if err != nil || code != http.StatusConflict || ans["reloaded"] != false || !strings.Contains(fmt.Sprint(ans["error"]), "reload-policy.yaml") {
		t.Fatalf("an invalid policy: %d %v %v", code, ans, err)
	}
	r.WaitLog("reload refused: the policy in force is kept", nil)
	if ok, err := r.call(sid, tok.String(), "kept"); !ok || err != nil {
		t.Fatalf("echo after a refused reload: %v %v", ok, err)
	}
	mcptest.WriteFile(t, r.policyPath, r.policy("admin", 1, ""))
	if code, ans, err := r.reload(); err != nil || code != http.StatusOK || ans["reloaded"] != true {
		t.Fatalf("a valid policy: %d %v %v", code, ans, err)
	}
	if r.listsEcho(t, sid, hdr) {
		t.Error("echo still listed after the reload that narrowed it")
	}
	if ok, err := r.call(sid, tok.String(), "narrowed"); ok || err != nil {
		t.Fatalf("echo after the reload that narrowed it: %v %v", ok, err)
	}
	// The widened policy names another tool exactly: it gets its own
	// label in the metrics from the reload on.
	if strings.Contains(r.metrics(t), `tool="big"`) {
		t.Fatal("big has a metrics label before a policy names it")
	}
	mcptest.WriteFile(t, r.policyPath, r.policy("mcp", 1, "", mcptest.Priced("big", 1)))
	r.Signal(syscall.SIGHUP)
	mcptest.Eventually(t, "the SIGHUP's reload", func() bool {
		return len(r.LogWith("policy reloaded", func(m map[string]any) bool { return m["trigger"] == "SIGHUP" })) == 1
	})
	if ok, err := r.call(sid, tok.String(), "widened"); !ok || err != nil {
		t.Fatalf("echo after SIGHUP widened the policy again: %v %v", ok, err)
	}
	if m := r.metrics(t); !strings.Contains(m, `delegateos_tool_calls_total{result="allowed",tool="big"} 0`) {
		t.Errorf("no metrics label for the tool the reloaded policy names:\n%s", m)
	}
	r.Signal(syscall.SIGTERM)
	if !r.WaitExit(20 * time.Second) {
		t.Fatal("serve did not exit on SIGTERM")
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID); code != 0 {
		t.Fatalf("audit verify after reloads: %d %s %s", code, out, stderr)
	}
}

// Reloads, two at a time, during a burst of calls from several sessions:
// every call is answered, and the spend store holds exactly one charge
// per call allowed (none lost, none charged twice); the audit log records
// every reload applied, once per new file (a reload of the policy in
// force records nothing), and verifies.
func TestServeReloadDuringBurst(t *testing.T) {
	t.Parallel()
	r := startReloadServer(t)
	tok := r.e.Mint(nil, "mcp:echo:*")
	const sessions, calls, reloads = 4, 25, 8
	sids := make([]string, sessions)
	for i := range sids {
		sids[i] = r.Initialize(mcptest.Bearer(tok))
	}
	var mu sync.Mutex
	var errs []error
	allowed, applied, unchanged := 0, 0, 0
	var wg sync.WaitGroup
	started := make(chan struct{}, sessions)
	for i, sid := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range calls {
				ok, err := r.call(sid, tok.String(), fmt.Sprintf("s%d-%d", i, j))
				if j == 0 {
					started <- struct{}{}
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				if ok {
					allowed++
				}
				mu.Unlock()
			}
		}()
	}
	for range sessions {
		<-started
	}
	for k := range reloads {
		// Each file differs (so each reload is of a new policy), with the
		// same rules and costs.
		mcptest.WriteFile(t, r.policyPath, r.policy("mcp", 1, fmt.Sprintf("# reload %d\n", k)))
		var rw sync.WaitGroup
		for range 2 {
			rw.Add(1)
			go func() {
				defer rw.Done()
				code, ans, err := r.reload()
				mu.Lock()
				defer mu.Unlock()
				if err != nil || code != http.StatusOK {
					errs = append(errs, fmt.Errorf("reload: %d %v", code, err))
					return
				}
				if ans["unchanged"] == true {
					unchanged++
				} else {
					applied++
				}
			}()
		}
		rw.Wait()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if allowed != sessions*calls {
		t.Errorf("%d calls allowed; want %d", allowed, sessions*calls)
	}
	lines := r.LogWith("policy reloaded", nil)
	// Of the two reloads of each file, one applies it and the other finds
	// it in force: nothing is swapped or recorded for that one.
	if got := len(lines); got != applied || applied != reloads || unchanged != reloads {
		t.Errorf("%d reloads logged, %d applied and %d unchanged answered; want %d of each", got, applied, unchanged, reloads)
	}
	var took []string
	for _, l := range lines {
		took = append(took, fmt.Sprintf("%.2fms", l["took"].(float64)*1000))
	}
	t.Logf("each reload took (file read to swap, during the burst): %s", strings.Join(took, " "))
	r.Signal(syscall.SIGTERM)
	if !r.WaitExit(20 * time.Second) {
		t.Fatal("serve did not exit on SIGTERM")
	}
	u, err := budget.ReadUsage(r.spendPath)
	if err != nil {
		t.Fatal(err)
	}
	var spent, reserved int64
	for _, x := range u {
		spent += x.Committed
		reserved += x.Reserved
	}
	if spent != int64(allowed) || reserved != 0 {
		t.Errorf("the spend store holds %d committed and %d reserved; %d calls at 1 were allowed", spent, reserved, allowed)
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID); code != 0 {
		t.Fatalf("audit verify: %d %s %s", code, out, stderr)
	}
	out, _, _ := mcptest.CLI(t, "audit", "show", r.auditPath)
	if n := strings.Count(out, "delegateos/reload"); n != applied {
		t.Errorf("%d reload records in the audit log; want %d", n, applied)
	}
}

// metrics is the metrics listener's /metrics.
func (r *reloadServer) metrics(t *testing.T) string {
	t.Helper()
	res, err := http.Get(r.metricsBase + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
