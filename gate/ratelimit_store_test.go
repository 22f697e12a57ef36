package gate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
	"github.com/delegateos/delegateos/ratelimit"
)

// downRates is a rate-limit store whose Redis does not answer.
type downRates struct{ reserves, releases int }

func (s *downRates) Reserve([]ratelimit.Key, time.Time) (ratelimit.Admission, error) {
	s.reserves++
	return ratelimit.Admission{}, redisconn.Unavailable("rate-limit store redis://h:1/0", errors.New("i/o timeout"))
}

func (s *downRates) Release(ratelimit.Admission) error { s.releases++; return nil }

// A rate-limit store that does not answer refuses the call as
// store_unavailable, with or without a token, and never admits it.
func TestGateRateStoreUnavailable(t *testing.T) {
	f := newRateFixture(t, "allow_unauthenticated: true\nrate: 3/1m\n")
	down := &downRates{}
	f.gate.Rates = down
	for _, req := range []CallRequest{echo(f.a), echo("")} {
		d := f.call(t, req)
		if d.Allowed || d.Denial == nil || d.Denial.Type != StoreUnavailable {
			t.Fatalf("token %v: %+v; want %s", req.Token != "", d.Denial, StoreUnavailable)
		}
		if !strings.HasPrefix(d.Denial.Detail, "rate-limit store redis://h:1/0 is unavailable: i/o timeout; the call is refused") {
			t.Errorf("detail %q", d.Denial.Detail)
		}
		if (req.Token != "") != (len(d.Denial.Granted) == 1) {
			t.Errorf("granted %+v", d.Denial.Granted)
		}
	}
	if down.reserves != 2 {
		t.Errorf("%d reserves, want 2", down.reserves)
	}
	if spent := f.store.Spent(f.key(t, f.a)); spent != 0 {
		t.Errorf("spent %d on refused calls", spent)
	}
}

// key is the budget key of the leaf of tok.
func (f *rateFixture) key(t testing.TB, tok string) string {
	levels := f.gate.levels.of(f.scope(t, tok))
	return levels[len(levels)-1].Key
}

// The gate on a Redis store: windows shared by two gates (two proxies),
// and a call the budget refuses gives its slot back in Redis.
func TestGateRateLimitRedis(t *testing.T) {
	srv := redistest.StartFsync(t, "no")
	f := newRateFixture(t, "rate: 2/1m\ntools:\n  - {match: dear, namespace: mcp, action: dear, cost: 5000}\n")
	g := newRateFixture(t, "rate: 2/1m\ntools:\n  - {match: dear, namespace: mcp, action: dear, cost: 5000}\n")
	for _, x := range []*rateFixture{f, g} {
		r, err := ratelimit.OpenRedis(srv.URL(), RateLimits(x.gate.Policy))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		x.gate.Rates = r
	}
	if d := f.call(t, CallRequest{Tool: "dear", Token: f.root}); d.Allowed || d.Denial.Type != dct.BudgetExceeded {
		t.Fatalf("a call over the budget: %+v", d.Denial)
	}
	wantAllowed(t, f.call(t, echo(f.a)), "the first call, on one gate")
	wantAllowed(t, g.call(t, echo(g.b)), "the second, on the other gate")
	den := wantLimited(t, f.call(t, echo(f.root)), "the third, at the root both share", -1)
	if den.RetryAfterMs <= 0 || den.RetryAfterMs > 60_000 {
		t.Errorf("retryAfterMs %d", den.RetryAfterMs)
	}
	wantLimited(t, g.call(t, echo(g.a)), "the fourth, on the other gate", -1)
}
