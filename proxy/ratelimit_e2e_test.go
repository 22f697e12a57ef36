//go:build unix

package proxy_test

// Rate limits through the real binary: never more than N calls forwarded
// in any window, with calls made in parallel; refusals that say when to
// retry and are neither forwarded nor charged; every kind of gated
// request; and windows that survive the proxy's restart, clean or killed.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// rateData is the data of a rate_limited denial.
type rateData struct {
	Type         dct.DenialType `json:"type"`
	Detail       string         `json:"detail"`
	RetryAfterMs int64          `json:"retryAfterMs"`
	Requested    *dct.Capability
	Granted      []dct.Capability
}

// rateLimited reports whether r was refused as rate_limited, and its data.
func rateLimited(r mcptest.Result) (rateData, bool) {
	var d rateData
	if r.RPC == nil || r.RPC.Code != gate.DenialCode {
		return d, false
	}
	raw, _ := json.Marshal(r.RPC.Data)
	return d, json.Unmarshal(raw, &d) == nil && d.Type == gate.RateLimited
}

// forwarded counts the tools/call frames for tool the upstream received.
func forwarded(t *testing.T, record, tool string) int {
	t.Helper()
	n := 0
	for _, line := range upstreamInput(t, record) {
		if strings.Contains(line, `"method":"tools/call"`) && strings.Contains(line, `"name":"`+tool+`"`) {
			n++
		}
	}
	return n
}

// memoryOnly is the proxy's warning that rate-limit windows are not kept.
const memoryOnly = "rate-limit windows are kept in memory only and start afresh when the proxy restarts; set spend_store in the policy or --spend-store to keep them next to the spend"

// call is an allowed call: the forward happened between sent and done.
type call struct{ sent, done time.Time }

// crowdedWindow returns n+1 allowed calls that certainly were forwarded
// within less than per of each other, if any are: the latest done minus
// the earliest sent of the n+1 is under per. For each call as the earliest
// sent, the n others sent no earlier that were done soonest make the
// tightest such group, so every group is covered.
func crowdedWindow(calls []call, n int, per time.Duration) []call {
	slices.SortFunc(calls, func(a, b call) int { return a.sent.Compare(b.sent) })
	for i, first := range calls {
		rest := slices.Clone(calls[i+1:])
		if len(rest) < n {
			break
		}
		slices.SortFunc(rest, func(a, b call) int { return a.done.Compare(b.done) })
		group := append([]call{first}, rest[:n]...)
		latest := first.done
		for _, c := range group {
			latest = later(latest, c.done)
		}
		if latest.Sub(first.sent) < per {
			return group
		}
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Eight clients' worth of calls at once, for over three windows, under
// rate: 5/1s. No N+1 allowed calls fit in one window, every refusal is
// rate_limited with a wait of at most the window, every allowed call and
// no refused one reached the upstream, and the windows were used.
func TestE2ERateLimitParallel(t *testing.T) {
	t.Parallel()
	const n, per = 5, time.Second
	e := mcptest.NewEnv(t)
	wrap, record := recordUpstream(t, e)
	pol := e.Policy()
	pol.Extra = fmt.Sprintf("rate: %d/%s\n", n, "1s")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: e.Mint(nil, "mcp:echo:*"), Wrap: wrap})
	s := p.Connect(mcptest.SessionOptions{})
	// Without a spend store, the proxy says the windows will not last.
	p.WaitLog(memoryOnly, nil)

	var (
		mu      sync.Mutex
		allowed []call
		refused int
		wg      sync.WaitGroup
	)
	end := time.Now().Add(3*per + per/5)
	for g := range 8 {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				sent := time.Now()
				r := s.Call(t, "echo", map[string]any{"text": fmt.Sprintf("%d-%d", g, i)})
				done := time.Now()
				d, limited := rateLimited(r)
				mu.Lock()
				switch {
				case r.Err == nil && !r.Res.IsError:
					allowed = append(allowed, call{sent, done})
				case limited:
					refused++
					if d.RetryAfterMs < 1 || d.RetryAfterMs > per.Milliseconds() {
						t.Errorf("retryAfterMs %d, want 1 to %d", d.RetryAfterMs, per.Milliseconds())
					}
				default:
					t.Errorf("a call ended neither allowed nor rate_limited: %v %+v", r.Err, r.RPC)
				}
				mu.Unlock()
				if limited {
					// Half the wait, then a millisecond at a time: the
					// clients crowd the moment the window has room.
					time.Sleep(max(time.Duration(d.RetryAfterMs)*time.Millisecond/2, time.Millisecond))
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls allowed, %d refused", len(allowed), refused)
	if group := crowdedWindow(allowed, n, per); group != nil {
		var b strings.Builder
		for _, c := range group {
			fmt.Fprintf(&b, " [%s, %s]", c.sent.Sub(group[0].sent), c.done.Sub(group[0].sent))
		}
		t.Errorf("%d calls were forwarded within %s, under a limit of %d per %s; each between (from the first sent):%s", n+1, per, n, per, b.String())
	}
	// A window opens at the start and another once it has passed: at
	// least 2N get through, and the burst made the limit refuse calls.
	if len(allowed) < 2*n || refused == 0 {
		t.Errorf("%d calls allowed and %d refused; the limit was not exercised", len(allowed), refused)
	}
	mcptest.Eventually(t, "the upstream to have read every forwarded call", func() bool {
		return forwarded(t, record, "echo") >= len(allowed)
	})
	if got := forwarded(t, record, "echo"); got != len(allowed) {
		t.Errorf("the upstream received %d echo calls; %d were allowed", got, len(allowed))
	}
}

// A rule's rate: the call over it is refused with §11.2's error, type
// rate_limited, retryAfterMs and a message that says which limit and when
// to retry; it is not forwarded, not charged, and logged; calls the rule
// does not map go on.
func TestE2ERateLimitDenial(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	wrap, record := recordUpstream(t, e)
	spend := filepath.Join(e.Dir, "spend.log")
	pol := &mcptest.Policy{Roots: []string{e.Root.ID()}, SpendStore: spend, Extra: `tools:
  - {match: echo, namespace: mcp, action: echo, cost: 100, rate: 2/1m}
`}
	tok := e.Mint(nil, "mcp:*:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok, Wrap: wrap})
	s := p.Connect(mcptest.SessionOptions{})
	// The window opens at the first call, after start: what is left of it
	// when the third is refused is at least a minute less the time since
	// start, however slow the machine (the bound had ten seconds of slack,
	// and started after the first two calls).
	start := time.Now()
	for i := range 2 {
		s.Call(t, "echo", map[string]any{"text": strconv.Itoa(i)}).OK(t, "echo within the rate")
	}
	r := s.Call(t, "echo", map[string]any{"text": "third"})
	d, ok := rateLimited(r)
	if !ok {
		t.Fatalf("the third echo: %v %+v; want rate_limited", r.Err, r.RPC)
	}
	del := tok.Unverified().Authority.DelegationID
	wantDetail := "delegation " + del + " has made 2 calls in the last 1m, the rate of the tools rule that matches echo: 2/1m; retry after "
	if !strings.HasPrefix(d.Detail, wantDetail) {
		t.Errorf("detail %q\nwant it to begin %q", d.Detail, wantDetail)
	}
	if d.RetryAfterMs > 60_000 || d.RetryAfterMs < 60_000-time.Since(start).Milliseconds()-1 {
		t.Errorf("retryAfterMs %d; the window of a minute opened moments ago", d.RetryAfterMs)
	}
	if d.Requested == nil || *d.Requested != (dct.Capability{Namespace: "mcp", Action: "echo", Resource: "*"}) || len(d.Granted) != 1 {
		t.Errorf("requested %+v, granted %+v", d.Requested, d.Granted)
	}
	if msg := r.RPC.Message; !strings.HasPrefix(msg, "DCT verification failed: rate_limited — "+wantDetail) {
		t.Errorf("message %q", msg)
	}
	// Another tool, with no rate, is not held back.
	s.Call(t, "list_files", map[string]any{"path": "/project"}).OK(t, "a tool no rated rule maps")
	p.WaitLog("decision", func(m map[string]any) bool { return m["reason"] == "rate_limited" && m["allowed"] == false })
	if got := forwarded(t, record, "echo"); got != 2 {
		t.Errorf("the upstream received %d echo calls, want 2", got)
	}
	s.Close()
	p.Stdin.Close()
	if !p.WaitExit(10 * time.Second) {
		t.Fatal("the proxy did not exit")
	}
	store, err := budget.Open(spend, "")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	key := e.Root.ID() + "/" + strconv.Itoa(len(del)) + ":" + del
	if got := store.Spent(key); got != 200 {
		t.Errorf("spent %d; two echo calls cost 200 and the refused one nothing", got)
	}
}

// resources/read, resources/subscribe, prompts/get and completion/complete
// count against their rules' rates, through the binary.
func TestE2ERateLimitResourcesAndPrompts(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	pol := &mcptest.Policy{Roots: []string{e.Root.ID()}, Extra: `resources:
  - {match: "file:///project/**", namespace: docs, action: read, rate: 2/1h}
prompts:
  - {match: "*", namespace: prompts, action: get, rate: 2/1h}
`}
	c := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: e.Mint(nil, "docs:read:*", "prompts:get:*")}).Raw()
	c.Initialize()
	for i, tc := range []struct {
		params, method string
		limited        bool
	}{
		{`{"uri":"file:///project/README.md"}`, "resources/read", false},
		{`{"uri":"file:///project/sub/notes.md"}`, "resources/subscribe", false},
		{`{"uri":"file:///project/README.md"}`, "resources/read", true},
		{`{"ref":{"type":"ref/resource","uri":"file:///project/{+path}"},"argument":{"name":"path","value":"s"}}`, "completion/complete", true},
		{`{"name":"greeting"}`, "prompts/get", false},
		{`{"ref":{"type":"ref/prompt","name":"summarize"},"argument":{"name":"path","value":"/p"}}`, "completion/complete", false},
		{`{"name":"greeting"}`, "prompts/get", true},
	} {
		id := strconv.Itoa(i + 10)
		c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + tc.method + `","params":` + tc.params + `}`)
		m := c.Response(id)
		if got := denialType(m) == string(gate.RateLimited); got != tc.limited {
			t.Errorf("%s %s: rate_limited %v, want %v (%+v)", tc.method, tc.params, got, tc.limited, m.Error)
		}
		if !tc.limited && m.Error != nil {
			t.Errorf("%s %s: %+v", tc.method, tc.params, m.Error)
		}
	}
}

// startRated starts a proxy whose policy allows 3 calls an hour, with
// its spend store (and so its rate-limit windows) at spend, and connects.
func startRated(e *mcptest.Env, spend string, tok *dct.Token, wantExit func(int) bool) (*mcptest.Process, *mcptest.Session) {
	pol := e.Policy()
	pol.SpendStore = spend
	pol.Extra = "rate: 3/1h\n"
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok, WantExit: wantExit})
	return p, p.Connect(mcptest.SessionOptions{})
}

// A client cannot reset a delegation's window by starting the proxy again:
// with a spend store the windows are kept next to it, whether the proxy
// exited cleanly or was killed after the calls were answered.
func TestE2ERateLimitSurvivesRestart(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"exit", "kill"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			spend := filepath.Join(e.Dir, "spend.log")
			tok := e.Mint(nil, "mcp:echo:*")
			var wantExit func(int) bool
			if how == "kill" {
				wantExit = func(code int) bool { return code == -1 }
			}
			p, s := startRated(e, spend, tok, wantExit)
			for i := range 3 {
				s.Call(t, "echo", map[string]any{"text": strconv.Itoa(i)}).OK(t, "a call within the rate")
			}
			if how == "kill" {
				pid := p.UpstreamPID()
				if err := p.Cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				mcptest.Eventually(t, "the killed proxy's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
			} else {
				s.Close()
				p.Stdin.Close()
			}
			if !p.WaitExit(10 * time.Second) {
				t.Fatal("the first proxy did not exit")
			}
			p2, s2 := startRated(e, spend, tok, nil)
			d, ok := rateLimited(s2.Call(t, "echo", map[string]any{"text": "after the restart"}))
			if !ok || d.RetryAfterMs < 3_500_000 || d.RetryAfterMs > 3_600_000 {
				t.Fatalf("the first call after the restart: %+v (ok %v); want rate_limited for about an hour", d, ok)
			}
			if got := p2.LogWith(memoryOnly, nil); len(got) != 0 {
				t.Errorf("with a spend store, the proxy warned that the windows are in memory: %v", got)
			}
		})
	}
}
