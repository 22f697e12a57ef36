package serve_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/receipt"
)

// The load run of the README's "Run as a service", through the real
// binary under the default session caps: 64 sessions at once, 16 for each
// of four clients' tokens (the most --max-credential-sessions lets one
// token hold), each calling a priced tool until its token's budget is
// spent. Every token's spend is exactly its budget, every allowed call has
// its decision and execution receipts, the others are budget_exceeded,
// /healthz answers during the run, and after SIGTERM the audit log
// verifies and holds them all.
func TestServeLoadSixtyFourSessionsStaysExact(t *testing.T) {
	const (
		tokens      = 4
		perToken    = 16 // the default --max-credential-sessions
		callsEach   = 5
		cost        = 10
		budgetCalls = 50 // of the 80 calls each token's sessions make
	)
	e := mcptest.NewEnv(t)
	key := mcptest.NewKey(t, "server")
	logPath := filepath.Join(e.Dir, "audit.log")
	store := filepath.Join(e.Dir, "spend.json")
	pol := e.Policy(mcptest.Priced("echo", cost))
	pol.Extra = "proxy_key: " + e.KeyFile(key) + "\naudit_log: " + logPath + "\n"
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--spend-store", store}})

	toks := make([]*dct.Token, tokens)
	for i := range toks {
		toks[i] = e.Mint(mcptest.Budget(budgetCalls*cost), "mcp:echo:*")
	}
	type session struct {
		tok int
		sid string
	}
	var sessions []session
	for i := range tokens {
		for range perToken {
			sessions = append(sessions, session{i, srv.Initialize(mcptest.Bearer(toks[i]))})
		}
	}

	var mu sync.Mutex
	allowed := make([]int, tokens)
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	for n, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range callsEach {
				r := srv.Post(s.sid, mcptest.Bearer(toks[s.tok]), mcptest.CallBody(fmt.Sprint(n*100+c), "echo", map[string]any{"text": "hi"}))
				outcome := fmt.Sprintf("HTTP %d", r.Status)
				for _, m := range r.Messages() {
					if _, ok := m["result"]; ok {
						outcome = "allowed"
					} else if e, ok := m["error"].(map[string]any); ok {
						d, _ := e["data"].(map[string]any)
						outcome = fmt.Sprint(d["type"])
					}
				}
				mu.Lock()
				outcomes[outcome]++
				if outcome == "allowed" {
					allowed[s.tok]++
				}
				mu.Unlock()
			}
		}()
	}
	if r := srv.Do(http.MethodGet, "/healthz", nil, ""); r.Status != http.StatusOK {
		t.Errorf("/healthz during the load: HTTP %d", r.Status)
	}
	wg.Wait()
	if want := tokens * budgetCalls; outcomes["allowed"] != want || outcomes[string(dct.BudgetExceeded)] != tokens*perToken*callsEach-want {
		t.Fatalf("outcomes of %d calls: %v; want %d allowed, the rest %s", tokens*perToken*callsEach, outcomes, want, dct.BudgetExceeded)
	}
	for i, n := range allowed {
		if n != budgetCalls {
			t.Errorf("token %d: %d calls allowed, want its budget's %d", i, n, budgetCalls)
		}
	}

	srv.Signal(syscall.SIGTERM)
	if !srv.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("serve did not exit on SIGTERM")
	}
	out, _, code := mcptest.CLI(t, "spend", "--store", store, "--json")
	if code != 0 || strings.Count(out, fmt.Sprintf(`"committed": %d`, budgetCalls*cost)) != tokens {
		t.Fatalf("spend after the run (exit %d), want %d budgets spent exactly (%d each):\n%s", code, tokens, budgetCalls*cost, out)
	}
	if out, stderr, code := mcptest.CLI(t, "audit", "verify", logPath, "--key-id", key.DID()); code != 0 || !strings.HasPrefix(out, "OK audit log") {
		t.Fatalf("audit verify: %d %s %s", code, out, stderr)
	}
	count := receiptCounts(t, logPath)
	if want := tokens * budgetCalls; count[receipt.DecisionAllow] != want || count["execution"] != want {
		t.Errorf("receipts in the log: %v, want %d allowed decisions and %d executions", mustJSON(count), want, want)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
