package gate

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
)

// rateFixture is a gate with a rate-limited policy, a clock the test
// moves, a root token and two tokens attenuated from it.
type rateFixture struct {
	gate            *Gate
	store           *budget.Memory
	now             atomic.Int64 // Unix nanoseconds
	root, a, b      string       // tokens: root's, and two children of it
	other           string       // a token of another root delegation
	rootID, childID string       // delegation IDs of root and a
}

func newRateFixture(t testing.TB, policyYAML string) *rateFixture {
	t.Helper()
	return newRateFixtureFor(t, policyYAML, "del_rateroot", dct.Capability{Namespace: "*", Action: "*", Resource: "*"})
}

// newRateFixtureFor is newRateFixture with the root token's delegation ID
// and capability.
func newRateFixtureFor(t testing.TB, policyYAML, rootID string, grant dct.Capability) *rateFixture {
	t.Helper()
	key := func(b byte, name string) *identity.Keypair {
		k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	root, agent, sub := key(1, "root"), key(2, "agent"), key(3, "sub")
	f := &rateFixture{store: budget.NewMemory(), rootID: rootID, childID: "del_ratea"}
	start := time.Now()
	f.now.Store(start.UnixNano())
	tok, err := dct.Create(dct.CreateParams{
		Issuer: root, Delegatee: agent.ID(),
		Capabilities: []dct.Capability{grant},
		ContractID:   "ct_rate", DelegationID: f.rootID,
		MaxChainDepth: 2, MaxBudgetMicrocents: 1000,
		IssuedAt: start.Add(-time.Minute), ExpiresAt: start.Add(24 * time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	child := func(id string) string {
		budget := int64(1000)
		c, err := dct.Attenuate(tok, dct.AttenuateParams{Attenuator: agent, Delegatee: sub.ID(), DelegationID: id, MaxBudgetMicrocents: &budget})
		if err != nil {
			t.Fatal(err)
		}
		return c.String()
	}
	f.root, f.a, f.b = tok.String(), child(f.childID), child("del_rateb")
	other, err := dct.Create(dct.CreateParams{
		Issuer: root, Delegatee: agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "*", Action: "*", Resource: "*"}},
		ContractID:   "ct_rate", DelegationID: "del_rateother",
		MaxChainDepth: 2, MaxBudgetMicrocents: 1000,
		IssuedAt: start.Add(-time.Minute), ExpiresAt: start.Add(24 * time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.other = other.String()
	pol, err := policy.Parse([]byte("roots: ["+root.ID()+"]\n"+policyYAML), "/d")
	if err != nil {
		t.Fatal(err)
	}
	v, err := dct.NewVerifier(dct.Options{Roots: pol.Roots})
	if err != nil {
		t.Fatal(err)
	}
	f.gate = &Gate{Policy: pol, Verifier: v, Budget: f.store, HonourUpstreamCost: pol.HonourUpstreamCost,
		Now: func() time.Time { return time.Unix(0, f.now.Load()) }}
	return f
}

func (f *rateFixture) advance(d time.Duration) { f.now.Add(int64(d)) }

// call decides req and settles an allowed call at its cost.
func (f *rateFixture) call(t testing.TB, req CallRequest) Decision {
	t.Helper()
	d := f.gate.Decide(req)
	if d.Allowed {
		if _, err := f.gate.Settle(&d, d.Call.Cost, false); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func echo(tok string) CallRequest { return CallRequest{Tool: "echo", Token: tok} }

func wantAllowed(t testing.TB, d Decision, what string) {
	t.Helper()
	if !d.Allowed {
		t.Fatalf("%s: refused: %+v", what, d.Denial)
	}
}

func wantLimited(t testing.TB, d Decision, what string, retryMs int64) *Denial {
	t.Helper()
	if d.Allowed || d.Denial == nil || d.Denial.Type != RateLimited {
		t.Fatalf("%s: %+v; want %s", what, d.Denial, RateLimited)
	}
	if retryMs >= 0 && d.Denial.RetryAfterMs != retryMs {
		t.Fatalf("%s: retryAfterMs %d, want %d (%s)", what, d.Denial.RetryAfterMs, retryMs, d.Denial.Detail)
	}
	return d.Denial
}

// N calls pass, the next is refused with rate_limited, the time until the
// oldest leaves the window, and is not charged; then the window moves on.
func TestGateRateLimit(t *testing.T) {
	f := newRateFixture(t, "rate: 3/1m\ndefault_cost: 10\n")
	for i := range 3 {
		wantAllowed(t, f.call(t, echo(f.root)), "call within the limit")
		if i == 0 {
			f.advance(20 * time.Second)
		}
	}
	spent := f.store.Spent(BudgetLevels(f.scope(t, f.root))[0].Key)
	f.advance(10 * time.Second)
	den := wantLimited(t, f.call(t, echo(f.root)), "fourth call", 30_000)
	want := "delegation del_rateroot has made 3 calls in the last 1m, the policy's rate: 3/1m; retry after 30s"
	if den.Detail != want {
		t.Errorf("detail %q\nwant   %q", den.Detail, want)
	}
	if den.Requested == nil || den.Requested.Action != "echo" || len(den.Granted) != 1 {
		t.Errorf("denial %+v lacks what was requested and granted", den)
	}
	if got := f.store.Spent(BudgetLevels(f.scope(t, f.root))[0].Key); got != spent {
		t.Errorf("the refused call was charged: spent %d, was %d", got, spent)
	}
	f.advance(30*time.Second - time.Millisecond)
	wantLimited(t, f.call(t, echo(f.root)), "a millisecond early", 1)
	f.advance(time.Millisecond)
	wantAllowed(t, f.call(t, echo(f.root)), "once the first call left the window")
	wantLimited(t, f.call(t, echo(f.root)), "the window full again", 20_000)
}

func (f *rateFixture) scope(t testing.TB, tok string) *dct.AuthorizedScope {
	t.Helper()
	s, err := f.gate.Verifier.VerifyChain(tok, time.Unix(0, f.now.Load()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A sub-delegation's calls count against its ancestors' limits too: the
// root's calls and both children's share the root's window, and each
// child has its own.
func TestGateRateLimitSubDelegation(t *testing.T) {
	f := newRateFixture(t, "rate: 3/1m\n")
	wantAllowed(t, f.call(t, echo(f.a)), "a, 1")
	wantAllowed(t, f.call(t, echo(f.a)), "a, 2")
	wantAllowed(t, f.call(t, echo(f.b)), "b, 1")
	den := wantLimited(t, f.call(t, echo(f.b)), "b, 2: the root's window is full", 60_000)
	if !strings.HasPrefix(den.Detail, "delegation del_rateroot has made 3 calls") {
		t.Errorf("the denial names another delegation: %s", den.Detail)
	}
	wantLimited(t, f.call(t, echo(f.root)), "the root itself", 60_000)

	// Another root delegation has a window of its own.
	wantAllowed(t, f.call(t, echo(f.other)), "another root delegation")
}

// A rule's rate counts the calls it maps, together, and not others; the
// policy's counts them all.
func TestGateRateLimitRule(t *testing.T) {
	f := newRateFixture(t, `tools:
  - {match: "write_*", namespace: docs, action: write, rate: 2/1h}
  - {match: read, namespace: docs, action: read}
`)
	wantAllowed(t, f.call(t, CallRequest{Tool: "write_a", Token: f.root}), "write_a")
	wantAllowed(t, f.call(t, CallRequest{Tool: "write_b", Token: f.root}), "write_b")
	den := wantLimited(t, f.call(t, CallRequest{Tool: "write_a", Token: f.root}), "write_a again", 3_600_000)
	if !strings.Contains(den.Detail, "the rate of the tools rule that matches write_*: 2/1h") {
		t.Errorf("detail %q", den.Detail)
	}
	for range 5 {
		wantAllowed(t, f.call(t, CallRequest{Tool: "read", Token: f.root}), "a call no rated rule maps")
		wantAllowed(t, f.call(t, echo(f.root)), "a call no rule maps")
	}
}

// Every kind of gated request counts against the rate of the rule that
// maps it, and against the policy's.
func TestGateRateLimitEveryRequestKind(t *testing.T) {
	const rules = `resources:
  - {match: "file:///srv/**", namespace: files, action: read, rate: 2/1m}
prompts:
  - {match: "review", namespace: prompts, action: get, rate: 2/1m}
`
	f := newRateFixture(t, rules)
	res := func(method string) CallRequest {
		return CallRequest{Method: method, URI: "file:///srv/a.md", Token: f.root}
	}
	wantAllowed(t, f.call(t, res(MethodResourcesRead)), "resources/read")
	wantAllowed(t, f.call(t, res(MethodResourcesSubscribe)), "resources/subscribe")
	wantLimited(t, f.call(t, CallRequest{Method: MethodSubscriptionsListen, URIs: []string{"file:///srv/b", "file:///srv/c"}, Token: f.root}), "subscriptions/listen", -1)
	wantLimited(t, f.call(t, CallRequest{Method: MethodCompletionComplete, URI: "file:///srv/{x}", Token: f.root}), "completion/complete of a resource", -1)
	wantAllowed(t, f.call(t, CallRequest{Method: MethodResourcesRead, URI: "file:///etc/a", Token: f.root}), "a URI no rated rule maps")

	prompt := CallRequest{Method: MethodPromptsGet, Prompt: "review", Token: f.root}
	wantAllowed(t, f.call(t, prompt), "prompts/get")
	wantAllowed(t, f.call(t, CallRequest{Method: MethodCompletionComplete, Prompt: "review", Token: f.root}), "completion/complete of a prompt")
	wantLimited(t, f.call(t, prompt), "prompts/get, third", -1)

	// The policy's rate counts every kind, a subscription to several URIs
	// once.
	g := newRateFixture(t, "rate: 6/1m\n"+rules)
	for _, req := range []CallRequest{
		echo(g.root),
		{Method: MethodResourcesRead, URI: "file:///etc/x", Token: g.root},
		{Method: MethodResourcesSubscribe, URI: "file:///etc/x", Token: g.root},
		{Method: MethodSubscriptionsListen, URIs: []string{"file:///srv/a", "file:///srv/b", "file:///etc/c"}, Token: g.root},
		{Method: MethodPromptsGet, Prompt: "other", Token: g.root},
		{Method: MethodCompletionComplete, Prompt: "other", Token: g.root},
	} {
		wantAllowed(t, g.call(t, req), req.Method+" "+req.Target())
	}
	wantLimited(t, g.call(t, echo(g.root)), "the seventh request", -1)
}

// A call the budget refuses after the rate limits admitted it gives its
// slot back: it was not forwarded.
func TestGateRateLimitBudgetRefusalReleases(t *testing.T) {
	f := newRateFixture(t, "rate: 1/1m\ntools:\n  - {match: dear, namespace: mcp, action: dear, cost: 5000}\n")
	d := f.call(t, CallRequest{Tool: "dear", Token: f.root})
	if d.Allowed || d.Denial.Type != dct.BudgetExceeded {
		t.Fatalf("a call over the budget: %+v", d.Denial)
	}
	wantAllowed(t, f.call(t, echo(f.root)), "the next call, within the budget")
	wantLimited(t, f.call(t, echo(f.root)), "the one after", 60_000)
}

// Requests without a token, when the policy forwards them, share one
// window.
func TestGateRateLimitWithoutToken(t *testing.T) {
	f := newRateFixture(t, "allow_unauthenticated: true\nrate: 2/1s\n")
	wantAllowed(t, f.call(t, echo("")), "first")
	wantAllowed(t, f.call(t, CallRequest{Method: MethodPromptsGet, Prompt: "p"}), "second")
	den := wantLimited(t, f.call(t, echo("")), "third", 1000)
	if !strings.HasPrefix(den.Detail, "requests without a token have made 2 calls in the last 1s") {
		t.Errorf("detail %q", den.Detail)
	}
	wantAllowed(t, f.call(t, echo(f.root)), "a call with a token has its own window")
}

// The denial is DelegateOS §11.2's error with retryAfterMs among its data.
func TestRateLimitedDenialJSON(t *testing.T) {
	f := newRateFixture(t, "rate: 1/1s\n")
	wantAllowed(t, f.call(t, echo(f.root)), "first")
	f.advance(250*time.Millisecond + 1)
	d := f.call(t, echo(f.root))
	b, err := json.Marshal(d.Denial)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "rate_limited" || got["retryAfterMs"] != 750.0 {
		t.Fatalf("denial %s", b)
	}
	if !strings.HasPrefix(d.Denial.Message(), "DCT verification failed: rate_limited — delegation del_rateroot has made 1 call in the last 1s") {
		t.Errorf("message %q", d.Denial.Message())
	}
	// Other denials carry no retryAfterMs.
	if b, _ := json.Marshal(&Denial{Type: dct.Expired}); strings.Contains(string(b), "retryAfterMs") {
		t.Errorf("%s", b)
	}
}

// Decisions made in parallel, by children of one root, at one moment:
// exactly N pass at the root, however the calls interleave.
func TestGateRateLimitParallel(t *testing.T) {
	const n = 7
	f := newRateFixture(t, "rate: 7/1h\n")
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 16 {
		tok := []string{f.root, f.a, f.b}[i%3]
		wg.Go(func() {
			for range 20 {
				d := f.gate.Decide(echo(tok))
				switch {
				case d.Allowed:
					allowed.Add(1)
					if _, err := f.gate.Settle(&d, 0, false); err != nil {
						t.Error(err)
					}
				case d.Denial.Type != RateLimited:
					t.Errorf("refused as %s: %s", d.Denial.Type, d.Denial.Detail)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != n {
		t.Fatalf("%d calls allowed in parallel under a limit of %d", got, n)
	}
}

// A policy with no rate sets up no limiter.
func TestGateWithoutRates(t *testing.T) {
	f := newRateFixture(t, "default_cost: 0\n")
	for range 100 {
		wantAllowed(t, f.call(t, echo(f.root)), "call")
	}
	if s := f.gate.rateLimits(); s.limited || s.limiter != nil {
		t.Fatalf("rate state %+v for a policy without rates", s)
	}
}

// RateLimits names the policy's limit and each rated rule's by its map
// and match.
func TestRateLimitsNames(t *testing.T) {
	p, err := policy.Parse([]byte(`rate: 1/1s
tools: [{match: "w*", namespace: n, action: a, rate: 2/1m}, {match: r, namespace: n, action: b}]
resources: [{match: "file:///**", namespace: f, action: r, rate: 3/1h}]
prompts: [{match: p, namespace: q, action: g, rate: 4/1s}]
`), "/d")
	if err != nil {
		t.Fatal(err)
	}
	got := RateLimits(p)
	want := map[string]string{"policy": "1/1s", "tools:w*": "2/1m0s", "resources:file:///**": "3/1h0m0s", "prompts:p": "4/1s"}
	if len(got) != len(want) {
		t.Fatalf("RateLimits = %v", got)
	}
	for name, lim := range got {
		if lim.String() != want[name] {
			t.Errorf("%s: %s, want %s", name, lim, want[name])
		}
	}
}

// A fully spent leaf is refused as budget_exceeded ahead of every later
// check, whichever of them would refuse too (§10.1 step 6 before 7), and
// for a call that costs nothing, although the gate reads the spend only
// where that answer decides.
func TestGateSpentLeafComesFirst(t *testing.T) {
	f := newRateFixtureFor(t, "rate: 2/1m\ndefault_cost: 500\ntools:\n"+
		"  - {match: free, namespace: mcp, action: free, resource: {arg: /path}, cost: 0}\n"+
		"  - {match: echo, namespace: mcp, action: echo, resource: {arg: /path}}\n", "del_spentroot",
		dct.Capability{Namespace: "mcp", Action: "*", Resource: "/project/**"})
	at := func(tool, path string) CallRequest {
		return CallRequest{Tool: tool, Token: f.root, Arguments: json.RawMessage(`{"path":"` + path + `"}`)}
	}
	for range 2 {
		wantAllowed(t, f.call(t, at("echo", "/project/a")), "a call within budget and rate")
	}
	unpinned := at("echo", "/project/a")
	unpinned.Unpinned = "tool echo is not pinned"
	check := func(name string, req CallRequest) {
		t.Helper()
		d := f.call(t, req)
		if d.Allowed || d.Denial == nil || d.Denial.Type != dct.BudgetExceeded || !strings.Contains(d.Denial.Detail, "spent 1000 of a budget of 1000") {
			t.Errorf("%s: %+v, want budget_exceeded: spent 1000 of a budget of 1000", name, d.Denial)
		}
	}
	check("not covered", at("echo", "/etc/passwd"))
	check("unpinned", unpinned)
	check("over the rate, too", at("echo", "/project/b"))
	f.advance(2 * time.Minute) // the rate's window is empty again
	if d := f.gate.Decide(at("free", "/project/a")); d.Call.Cost != 0 {
		t.Fatalf("the free tool costs %d", d.Call.Cost)
	}
	check("free", at("free", "/project/a"))
	check("costing", at("echo", "/project/a"))
}
