//go:build unix

package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// spendRun is a proxy with a spend store and a workspace in front of the
// docserver, and three tokens attenuated root → A → B → C: A is the
// agent's root delegation, B narrows it for b and C narrows B's for c.
type spendRun struct {
	t            *testing.T
	e            *mcptest.Env
	b, c         *identity.Keypair
	store, ws    string
	policy       string
	a, bTok, cTk *dct.Token
	ids          []string // the delegation IDs of A, B and C
	p            *mcptest.Process
	s            *mcptest.Session
}

// The budgets of A, B and C, and the policy's costs.
const (
	spendBudgetA, spendBudgetB, spendBudgetC = 100_000, 50_000, 20_000
	costRead, costSlow                       = 100, 500
)

func newSpendRun(t *testing.T) *spendRun {
	t.Helper()
	e := mcptest.NewEnv(t)
	r := &spendRun{t: t, e: e, b: mcptest.NewKey(t, "b"), c: mcptest.NewKey(t, "c"),
		store: filepath.Join(e.Dir, "spend.log"), ws: filepath.Join(e.Dir, "workspace"), policy: filepath.Join(e.Dir, "spend-policy.yaml")}
	r.a = e.Mint(func(p *dct.CreateParams) {
		p.ContractID = "ct_aaaaaaaaaaaa"
		p.MaxBudgetMicrocents = spendBudgetA
	}, "docs:read:/project/**", "mcp:echo:*", "mcp:slow:*")
	attenuate := func(parent *dct.Token, from, to *identity.Keypair, contractID string, budget int64) *dct.Token {
		tok, err := dct.Attenuate(parent, dct.AttenuateParams{Attenuator: from, Delegatee: to.ID(), DelegationID: mcptest.NewDelegationID(),
			ContractID: contractID, MaxBudgetMicrocents: &budget})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	r.bTok = attenuate(r.a, e.Agent, r.b, "ct_bbbbbbbbbbbb", spendBudgetB)
	r.cTk = attenuate(r.bTok, r.b, r.c, "ct_cccccccccccc", spendBudgetC)
	u := r.cTk.Unverified()
	r.ids = []string{u.Authority.DelegationID, u.Attenuations[0].DelegationID, u.Attenuations[1].DelegationID}

	pol := e.Policy(mcptest.Priced("slow", costSlow))
	pol.Rules[0].Cost = costRead // read_file
	pol.SpendStore = r.store
	pol.Extra = "workspace: " + strconv.Quote(r.ws) + "\n"
	mcptest.WriteFile(t, r.policy, pol.YAML())
	r.p = e.StartProxy(mcptest.ProxyOptions{Flags: []string{"--policy", r.policy}})
	r.s = r.p.Connect(mcptest.SessionOptions{})
	return r
}

// delegateC sends delegateos/delegate for C, with a contract b signs: the
// proxy records the chain A, B, C in the workspace.
func (r *spendRun) delegateC() {
	t := r.t
	t.Helper()
	c, err := contract.Create(r.b, contract.CreateParams{ID: "ct_cccccccccccc", Title: "Read the sub-project notes",
		Inputs:              json.RawMessage(`{"path":"/project/sub/notes.md"}`),
		OutputSchema:        json.RawMessage(`{"type":"object"}`),
		Verification:        json.RawMessage(`{"method":"deterministic_check","checkName":"field_exists","checkParams":{"field":"summary"}}`),
		MaxBudgetMicrocents: 5000, Deadline: time.Now().Add(time.Hour), RequiredCapabilities: []string{"docs:read"},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cb, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.s.Wire.SendRequest(mcptest.Context(t), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId("dos-1"),
		Method: gate.MethodDelegate, Params: gate.DelegateParams{
			Contract: cb, DCT: r.cTk.String(), DCTFormat: dct.Format, DelegationID: r.ids[2], ParentDelegationID: r.ids[1]}})
	if err != nil {
		t.Fatal(err)
	}
	if res := decodeResult[gate.DelegateResult](t, resp); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
}

// call makes one call under tok, which must be allowed.
func (r *spendRun) call(tok *dct.Token, name string, args map[string]any) {
	r.t.Helper()
	r.s.CallAs(r.t, tok.String(), name, args).OK(r.t, name)
}

// spendJSON runs delegateos spend with args and --json.
func (r *spendRun) spendJSON(args ...string) spendReport {
	t := r.t
	t.Helper()
	out, stderr, code := mcptest.CLI(t, append([]string{"spend", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("delegateos spend %s: exit status %d\n%s%s", strings.Join(args, " "), code, out, stderr)
	}
	var rep spendReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("delegateos spend --json: %v\n%s", err, out)
	}
	return rep
}

type spendReport struct {
	Store       string       `json:"store"`
	Delegations []spendEntry `json:"delegations"`
}

type spendEntry struct {
	Key, Issuer, Parent          string
	Path                         []string
	Budget, Remaining, Calls     *int64
	Committed, Reserved          int64
	LastCall                     *string
	From, To, ContractID, Status string
}

// byPath returns the entries by their delegation IDs joined with '/'.
func (rep spendReport) byPath() map[string]spendEntry {
	m := map[string]spendEntry{}
	for _, d := range rep.Delegations {
		m[strings.Join(d.Path, "/")] = d
	}
	return m
}

// charged is what the proxy's decisions say each level was charged and how
// many calls it allowed under each: a call under a delegation spends at it
// and at every delegation above it.
func (r *spendRun) charged() (cost, calls map[string]int64) {
	cost, calls = map[string]int64{}, map[string]int64{}
	for _, d := range r.p.LogWith("decision", func(m map[string]any) bool { return m["allowed"] == true }) {
		leaf := -1
		for i, id := range r.ids {
			if d["delegation"] == id {
				leaf = i
			}
		}
		if leaf < 0 {
			r.t.Fatalf("a decision under no delegation of the run: %v", d)
		}
		c, ok := d["cost"].(float64)
		if !ok {
			r.t.Fatalf("a decision without a cost: %v", d)
		}
		for i := 0; i <= leaf; i++ {
			path := strings.Join(r.ids[:i+1], "/")
			cost[path] += int64(c)
			calls[path]++
		}
	}
	return cost, calls
}

// Through the real binary: calls under A, B and C (nested delegations,
// with priced, free, refused and in-flight calls), then delegateos spend,
// every figure checked against what the proxy charged; and the report
// read while the proxy runs.
func TestSpendReportNestedDelegations(t *testing.T) {
	t.Parallel()
	r := newSpendRun(t)
	r.delegateC()
	start := time.Now().Truncate(time.Millisecond)

	notes := map[string]any{"path": "/project/sub/notes.md"}
	for range 2 {
		r.call(r.a, "read_file", notes)
	}
	for range 3 {
		r.call(r.bTok, "read_file", notes)
	}
	r.call(r.bTok, "echo", map[string]any{"text": "free"})
	r.call(r.cTk, "read_file", notes)
	for range 2 {
		r.call(r.cTk, "echo", map[string]any{"text": "free"})
	}
	// Refused: charged nothing, and not counted as a call.
	if res := r.s.CallAs(t, r.cTk.String(), "write_file", map[string]any{"path": "/project/sub/x.md", "content": "x"}); res.RPC == nil || res.RPC.Code != gate.DenialCode {
		t.Fatalf("write_file under C: %+v", res)
	}

	// A call in flight: its cost is reserved at C, B and A.
	ctx, cancel := context.WithCancel(mcptest.Context(t))
	defer cancel()
	req := mcptest.CallRequest("slow", map[string]any{"steps": 1000, "delay_ms": 20})
	req.Params.Meta = &mcp.Meta{ProgressToken: "spend"}
	done := make(chan mcptest.Result, 1)
	slowStart := time.Now().Truncate(time.Millisecond)
	go func() { done <- r.s.CallExtra(ctx, req, mcptest.TokenParams(r.cTk.String())) }()
	mcptest.Eventually(t, "the slow call to start", func() bool {
		return len(r.s.Notifications("notifications/progress")) > 0
	})
	inFlight := r.spendJSON("--store", r.store).byPath()
	for i := range r.ids {
		path := strings.Join(r.ids[:i+1], "/")
		if d := inFlight[path]; d.Reserved != costSlow {
			t.Errorf("while the slow call runs, %s has %d reserved, want %d", path, d.Reserved, costSlow)
		}
	}
	cancel()
	<-done
	r.p.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "slow" && m["allowed"] == true })
	end := time.Now()

	// The figures, by hand and from the proxy's decisions.
	want := map[string]struct{ budget, committed, calls int64 }{
		r.ids[0]:                  {spendBudgetA, 2*costRead + 3*costRead + costRead + costSlow, 2 + 4 + 3 + 1},
		r.ids[0] + "/" + r.ids[1]: {spendBudgetB, 3*costRead + costRead + costSlow, 4 + 3 + 1},
		strings.Join(r.ids, "/"):  {spendBudgetC, costRead + costSlow, 3 + 1},
	}
	cost, calls := r.charged()
	rep := r.spendJSON("--policy", r.policy)
	if len(rep.Delegations) != 3 {
		t.Fatalf("%d delegations in the report, want 3: %+v", len(rep.Delegations), rep)
	}
	got := rep.byPath()
	issuer := r.e.Root.ID()
	holders := []*identity.Keypair{r.e.Root, r.e.Agent, r.b, r.c}
	for i := range r.ids {
		path := strings.Join(r.ids[:i+1], "/")
		d, w := got[path], want[path]
		if cost[path] != w.committed || calls[path] != w.calls {
			t.Errorf("%s: the proxy's decisions charged %d in %d calls, want %d in %d", path, cost[path], calls[path], w.committed, w.calls)
		}
		if d.Budget == nil || d.Remaining == nil || d.Calls == nil || d.LastCall == nil {
			t.Fatalf("%s: figures missing: %+v", path, d)
		}
		if *d.Budget != w.budget || d.Committed != cost[path] || d.Reserved != 0 || *d.Remaining != w.budget-cost[path] || *d.Calls != calls[path] {
			t.Errorf("%s: budget %d, committed %d, reserved %d, remaining %d, calls %d; want %d, %d, 0, %d, %d",
				path, *d.Budget, d.Committed, d.Reserved, *d.Remaining, *d.Calls, w.budget, cost[path], w.budget-cost[path], calls[path])
		}
		last, err := time.Parse(time.RFC3339Nano, *d.LastCall)
		if err != nil || last.Before(slowStart) || last.After(end) || last.Before(start) {
			t.Errorf("%s: last call %s (%v), want the slow call's start, between %s and %s", path, *d.LastCall, err, slowStart, end)
		}
		if d.Issuer != issuer || d.From != holders[i].ID() || d.To != holders[i+1].ID() || d.Status != "active" {
			t.Errorf("%s: issuer %s, %s → %s [%s]; want %s, %s → %s [active]", path, d.Issuer, d.From, d.To, d.Status, issuer, holders[i].ID(), holders[i+1].ID())
		}
		if i > 0 && d.Parent != got[strings.Join(r.ids[:i], "/")].Key {
			t.Errorf("%s: parent %q", path, d.Parent)
		}
	}
	if rep.Store != r.store {
		t.Errorf("the report names the store %q, want %q", rep.Store, r.store)
	}

	// The tree nests C under B under A, with names from the chain.
	out, stderr, code := mcptest.CLI(t, "spend", "--store", r.store, "--workspace", r.ws, "--format", "tree",
		"--name", "root="+r.e.Root.ID(), "--name", "agent="+r.e.Agent.ID(), "--name", "b="+r.b.ID(), "--name", "c="+r.c.ID())
	if code != 0 {
		t.Fatalf("spend --format tree: %d %s", code, stderr)
	}
	wantTree := fmt.Sprintf(`spend store %s
%s  root → agent  [active]  budget %d  committed %d  reserved 0  remaining %d  calls %d  last call *
└─ %s  agent → b  [active]  budget %d  committed %d  reserved 0  remaining %d  calls %d  last call *
   └─ %s  b → c  [active]  budget %d  committed %d  reserved 0  remaining %d  calls %d  last call *
`, r.store, r.ids[0], spendBudgetA, 1100, spendBudgetA-1100, 10, r.ids[1], spendBudgetB, 900, spendBudgetB-900, 8, r.ids[2], spendBudgetC, 600, spendBudgetC-600, 4)
	if !matchLines(out, wantTree) {
		t.Errorf("spend --format tree:\n%s\nwant:\n%s", out, wantTree)
	}
}

// matchLines reports whether got has the lines of want, where a line of
// want ending in '*' matches any line with what comes before it.
func matchLines(got, want string) bool {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	if len(g) != len(w) {
		return false
	}
	for i := range w {
		if p, ok := strings.CutSuffix(w[i], "*"); ok {
			if !strings.HasPrefix(g[i], p) {
				return false
			}
		} else if g[i] != w[i] {
			return false
		}
	}
	return true
}

// The report reads the store while the proxy writes it, and the proxy
// keeps serving: calls under A, B and C run in parallel while spend is
// run again and again. Every report is a state the store was in, and
// the last one has every call.
func TestSpendReportWhileProxyWrites(t *testing.T) {
	t.Parallel()
	r := newSpendRun(t)
	toks := []*dct.Token{r.a, r.bTok, r.cTk}
	const callers, each = 6, 30
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for range each {
				res := r.s.CallAs(t, toks[g%3].String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
				if res.Err != nil || res.Res.IsError {
					t.Errorf("a call while spend reads the store: %v %+v", res.Err, res.RPC)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reads := 0
	for running := true; running; reads++ {
		select {
		case <-done:
			running = false
		default:
		}
		byPath := r.spendJSON("--store", r.store).byPath()
		a, b, c := byPath[r.ids[0]], byPath[r.ids[0]+"/"+r.ids[1]], byPath[strings.Join(r.ids, "/")]
		for _, d := range []spendEntry{a, b, c} {
			if (d.Committed+d.Reserved)%costRead != 0 {
				t.Fatalf("read %d: %+v", reads, d)
			}
		}
		// A's calls include B's, and B's C's.
		if calls(a) < calls(b) || calls(b) < calls(c) || a.Committed+a.Reserved != costRead*calls(a) {
			t.Fatalf("read %d: A %+v, B %+v, C %+v", reads, a, b, c)
		}
	}
	final := r.spendJSON("--store", r.store).byPath()
	n := int64(callers * each)
	if a := final[r.ids[0]]; calls(a) != n || a.Committed != costRead*n || a.Reserved != 0 {
		t.Errorf("at the end A has %+v, want %d calls", a, n)
	}
	t.Logf("%d reports while %d calls were made", reads, n)
}

func calls(d spendEntry) int64 {
	if d.Calls == nil {
		return 0
	}
	return *d.Calls
}
