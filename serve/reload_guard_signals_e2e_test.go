//go:build unix

package serve_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
	"github.com/delegateos/delegateos/receipt"
)

// Red team of the reload (held): who can reach POST /reload, and budgets
// kept exact in a shared Redis store while reloads change the cost during
// a burst from several sessions.

// Tried: POST /reload from a browser page of another site (Origin), through
// a rebound DNS name (Host), and GET /reload (a link or an <img>). Held:
// each is refused before the file is read (the narrowed file is not
// applied), and only a plain POST applies it.
func TestE2EServeReloadGuard(t *testing.T) {
	t.Parallel()
	r := startReloadServer(t)
	tok := r.e.Mint(nil, "mcp:echo:*")
	sid := r.Initialize(mcptest.Bearer(tok))
	mcptest.WriteFile(t, r.policyPath, r.policy("admin", 1, ""))
	try := func(method string, hdr map[string]string) int {
		req, err := http.NewRequest(method, r.metricsBase+"/reload", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, c := range []struct {
		method string
		hdr    map[string]string
	}{
		{http.MethodPost, map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}},
		{http.MethodPost, map[string]string{"Host": "evil.example"}},
		{http.MethodPost, map[string]string{"Host": "evil.example", "Origin": "http://evil.example"}},
		{http.MethodGet, nil},
	} {
		if code := try(c.method, c.hdr); code == http.StatusOK {
			t.Errorf("%s /reload %v: HTTP %d", c.method, c.hdr, code)
		}
	}
	if ok, err := r.call(sid, tok.String(), "kept"); !ok || err != nil {
		t.Fatalf("a refused /reload applied the narrowed file: %v %v", ok, err)
	}
	if n := len(r.LogWith("policy reloaded", nil)); n != 0 {
		t.Fatalf("%d reloads applied by refused requests", n)
	}
	if code, _, err := r.reload(); code != http.StatusOK || err != nil {
		t.Fatalf("plain POST /reload: %d %v", code, err)
	}
	if ok, err := r.call(sid, tok.String(), "narrowed"); ok || err != nil {
		t.Fatalf("echo after the narrowing reload: %v %v", ok, err)
	}
}

// Tried: a spend store in Redis, a token with a budget of 60, three
// sessions calling as fast as they can while POST /reload switches the
// cost between 1 and 3 (a new file each time). Held: Redis holds exactly
// the sum of what the allowed calls' decision receipts reserved (each
// call settled once, at the cost it was decided at), that is at most the
// budget, nothing is left reserved, and the audit log verifies.
func TestE2EServeReloadRedisBudgetExact(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "server")
	r := &reloadServer{e: e, policyPath: filepath.Join(e.Dir, "reload-policy.yaml"),
		spendPath: rs.URL(), auditPath: filepath.Join(e.Dir, "audit.log"),
		keyFile: e.KeyFile(key), keyDID: key.DID()}
	mcptest.WriteFile(t, r.policyPath, r.policy("mcp", 1, ""))
	r.Server = e.StartServe(mcptest.ServeOptions{Flags: []string{"--policy", r.policyPath, "--metrics-listen", "127.0.0.1:0"}})
	r.metricsBase = "http://" + r.WaitLog("serving metrics", nil)["address"].(string)
	const budgetMC = 60
	tok := e.Mint(mcptest.Budget(budgetMC), "mcp:echo:*")
	const sessions, calls = 3, 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	started := make(chan struct{}, sessions)
	for i := range sessions {
		sid := r.Initialize(mcptest.Bearer(tok))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range calls {
				_, err := r.call(sid, tok.String(), fmt.Sprintf("s%d-%d", i, j))
				if j == 0 {
					started <- struct{}{}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for range sessions {
		<-started
	}
	for k := range 10 {
		mcptest.WriteFile(t, r.policyPath, r.policy("mcp", int64(1+2*((k+1)%2)), fmt.Sprintf("# %d\n", k)))
		if code, ans, err := r.reload(); code != http.StatusOK || err != nil {
			t.Fatalf("reload %d: %d %v %v", k, code, ans, err)
		}
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	r.Signal(syscall.SIGTERM)
	if !r.WaitExit(20 * time.Second) {
		t.Fatal("serve did not exit on SIGTERM")
	}
	u, err := budget.ReadUsage(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	var committed, reserved int64
	for _, x := range u {
		committed += x.Committed
		reserved += x.Reserved
	}
	b, err := os.ReadFile(r.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	var decided int64
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		rc, err := receipt.ParseEntry(line)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := rc.Body.(*receipt.DecisionBody); ok && d.Method == "tools/call" && d.Decision == receipt.DecisionAllow {
			decided += d.CostReserved
		}
	}
	// Each level of the chain holds the spend: the token here has one.
	if committed != decided || reserved != 0 || committed > budgetMC {
		t.Errorf("Redis holds %d committed, %d reserved; the allowed calls reserved %d; budget %d", committed, reserved, decided, budgetMC)
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID); code != 0 {
		t.Fatalf("audit verify: %d %s %s", code, out, stderr)
	}
}

// Tried: a changed policy, POST /reload and SIGHUP sent together with
// SIGTERM, during calls. Held: serve exits, and its audit log verifies as
// closed (a reload is either recorded before the log is closed or refused).
func TestE2EServeReloadRacingShutdown(t *testing.T) {
	t.Parallel()
	r := startReloadServer(t)
	tok := r.e.Mint(nil, "mcp:echo:*")
	sid := r.Initialize(mcptest.Bearer(tok))
	if ok, err := r.call(sid, tok.String(), "c1"); !ok || err != nil {
		t.Fatalf("echo: %v %v", ok, err)
	}
	mcptest.WriteFile(t, r.policyPath, r.policy("mcp", 3, ""))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = r.reload() // may find the server gone
	}()
	r.Signal(syscall.SIGHUP)
	r.Signal(syscall.SIGTERM)
	<-done
	if !r.WaitExit(20 * time.Second) {
		t.Fatal("serve did not exit on SIGTERM")
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID); code != 0 {
		t.Fatalf("audit verify after reloads racing SIGTERM: %d %s %s", code, out, stderr)
	}
}

// Tried: roots changed by POST /reload to a root that did not issue the
// token of an open session. Held: that session's next call is not
// answered with a result, and no new session opens with the old root's
// token; changed back, a new session works again.
func TestE2EServeReloadRootsChanged(t *testing.T) {
	t.Parallel()
	r := startReloadServer(t)
	tok := r.e.Mint(nil, "mcp:echo:*")
	sid := r.Initialize(mcptest.Bearer(tok))
	if ok, err := r.call(sid, tok.String(), "before"); !ok || err != nil {
		t.Fatalf("echo before: %v %v", ok, err)
	}
	other := mcptest.NewKey(t, "other-root")
	mcptest.WriteFile(t, r.policyPath, strings.Replace(r.policy("mcp", 1, ""), r.e.Root.ID(), other.ID(), 1))
	if code, ans, err := r.reload(); code != http.StatusOK || err != nil {
		t.Fatalf("reload: %d %v %v", code, ans, err)
	}
	if ok, _ := r.call(sid, tok.String(), "after"); ok {
		t.Fatal("an open session's call with a token of a root no longer trusted was allowed")
	}
	res := r.Do(http.MethodPost, strings.TrimPrefix(r.URL, r.Base), mcptest.Bearer(tok), `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if res.Status != http.StatusUnauthorized && res.Status != http.StatusForbidden {
		t.Fatalf("initialize with a token of a root no longer trusted: HTTP %d %s", res.Status, res.Body)
	}
	mcptest.WriteFile(t, r.policyPath, r.policy("mcp", 1, ""))
	if code, ans, err := r.reload(); code != http.StatusOK || err != nil {
		t.Fatalf("reload back: %d %v %v", code, ans, err)
	}
	sid = r.Initialize(mcptest.Bearer(tok))
	if ok, err := r.call(sid, tok.String(), "back"); !ok || err != nil {
		t.Fatalf("echo once the root is trusted again: %v %v", ok, err)
	}
}

// SIGHUP before serve takes it (the Go runtime's start) ends the process,
// so serve tells systemd when it is ready (sd_notify READY=1 on
// $NOTIFY_SOCKET), and the unit's Type=notify holds `systemctl reload`
// back until then (TestDeployFiles). Here the test is systemd: once it
// has READY=1, a SIGHUP reloads and does not end serve. Found by the red
// team: with Type=simple, a reload right after the start killed serve.
func TestE2EServeNotifiesReadyBeforeReloads(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	sock := filepath.Join(t.TempDir(), "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	path := filepath.Join(e.Dir, "notify-policy.yaml")
	pol := e.Policy(mcptest.Rule{Match: "echo", Namespace: "mcp", Action: "echo", Cost: 1})
	mcptest.WriteFile(t, path, pol.YAML())
	s := e.StartServe(mcptest.ServeOptions{Flags: []string{"--policy", path}, Env: []string{"NOTIFY_SOCKET=" + sock}})
	buf := make([]byte, 256)
	if err := ln.SetReadDeadline(time.Now().Add(mcptest.CallTimeout)); err != nil {
		t.Fatal(err)
	}
	n, err := ln.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("read from NOTIFY_SOCKET: %q %v", buf[:n], err)
	}
	s.Signal(syscall.SIGHUP)
	s.WaitLog("policy unchanged", nil)
	tok := e.Mint(nil, "mcp:echo:*")
	sid := s.Initialize(mcptest.Bearer(tok))
	if sid == "" {
		t.Fatal("no session after the reload")
	}
}

// Tried: POST /reload on the MCP listener of a server whose metrics are
// served beside the MCP endpoint (no --metrics-listen), where a client
// the gate guards against can reach. Held: there is no /reload there,
// and the narrowed file is not applied.
func TestE2EServeReloadNotBesideMCP(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	path := filepath.Join(e.Dir, "p.yaml")
	pol := e.Policy(mcptest.Rule{Match: "echo", Namespace: "mcp", Action: "echo", Cost: 1})
	mcptest.WriteFile(t, path, pol.YAML())
	s := e.StartServe(mcptest.ServeOptions{Flags: []string{"--policy", path}})
	tok := e.Mint(nil, "mcp:echo:*")
	hdr := mcptest.Bearer(tok)
	sid := s.Initialize(hdr)
	if res := s.Do(http.MethodGet, "/metrics", hdr, ""); res.Status != http.StatusOK {
		t.Fatalf("GET /metrics beside the MCP endpoint: HTTP %d", res.Status)
	}
	narrowed := e.Policy(mcptest.Rule{Match: "echo", Namespace: "admin", Action: "echo", Cost: 1})
	mcptest.WriteFile(t, path, narrowed.YAML())
	if res := s.Do(http.MethodPost, "/reload", hdr, ""); res.Status == http.StatusOK {
		t.Fatalf("POST /reload on the MCP listener: HTTP %d %s", res.Status, res.Body)
	}
	res := s.Post(sid, hdr, mcptest.CallBody(`"c"`, "echo", map[string]any{"text": "c"}))
	for _, m := range res.Messages() {
		if m["id"] == "c" {
			if _, ok := m["result"]; !ok {
				t.Fatalf("echo refused: the narrowed file was applied: %v", m)
			}
			return
		}
	}
	t.Fatalf("no answer to the call: HTTP %d %s", res.Status, res.Body)
}

// metricValue reads one unlabelled metric from /metrics on the metrics
// listener.
func (r *reloadServer) metricValue(t *testing.T, name string) float64 {
	t.Helper()
	res, err := http.Get(r.metricsBase + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// Tried: 300 POST /reload, 20 at a time, of a file that alternates
// between two contents (each a change), with SIGHUPs among them, while a
// session calls. Held: goroutines and open files are back where they were
// (within a few) once the storm ends, every call is answered, the audit
// log holds one record per reload applied and verifies.
func TestE2EServeReloadStorm(t *testing.T) {
	t.Parallel()
	r := startReloadServer(t)
	tok := r.e.Mint(nil, "mcp:echo:*")
	sid := r.Initialize(mcptest.Bearer(tok))
	if ok, err := r.call(sid, tok.String(), "warm"); !ok || err != nil {
		t.Fatalf("echo: %v %v", ok, err)
	}
	gBefore, fdBefore := r.metricValue(t, "go_goroutines"), r.metricValue(t, "process_open_fds")
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied := 0
	sem := make(chan struct{}, 20)
	for i := range 300 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if i%10 == 0 {
				// Replaced by a rename, as the docs say a policy should be.
				tmp := fmt.Sprintf("%s.%d", r.policyPath, i)
				mcptest.WriteFile(t, tmp, r.policy("mcp", int64(1+i%20/10), ""))
				if err := os.Rename(tmp, r.policyPath); err != nil {
					t.Error(err)
				}
				r.Signal(syscall.SIGHUP)
			}
			code, ans, err := r.reload()
			if err != nil || code != http.StatusOK {
				t.Errorf("reload: %d %v %v", code, ans, err)
				return
			}
			if ans["unchanged"] != true {
				mu.Lock()
				applied++
				mu.Unlock()
			}
		}()
		if i%50 == 0 {
			if ok, err := r.call(sid, tok.String(), fmt.Sprintf("c%d", i)); !ok || err != nil {
				t.Errorf("echo during the storm: %v %v", ok, err)
			}
		}
	}
	wg.Wait()
	if ok, err := r.call(sid, tok.String(), "after"); !ok || err != nil {
		t.Fatalf("echo after the storm: %v %v", ok, err)
	}
	http.DefaultClient.CloseIdleConnections()
	mcptest.Eventually(t, "goroutines and files back after the storm", func() bool {
		return r.metricValue(t, "go_goroutines") <= gBefore+5 && r.metricValue(t, "process_open_fds") <= fdBefore+5
	})
	r.Signal(syscall.SIGTERM)
	if !r.WaitExit(20 * time.Second) {
		t.Fatal("serve did not exit on SIGTERM")
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", r.auditPath, "--key-id", r.keyDID); code != 0 {
		t.Fatalf("audit verify after the storm: %d %s %s", code, out, stderr)
	}
	out, _, _ := mcptest.CLI(t, "audit", "show", r.auditPath)
	recorded := strings.Count(out, "delegateos/reload")
	sighups := len(r.LogWith("policy reloaded", func(m map[string]any) bool { return m["trigger"] == "SIGHUP" }))
	if recorded != applied+sighups {
		t.Errorf("%d reload records; %d applied by POST and %d by SIGHUP", recorded, applied, sighups)
	}
}
