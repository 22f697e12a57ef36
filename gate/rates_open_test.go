package gate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/delegateos/delegateos/internal/redistest"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/ratelimit"
)

// With the spend store in Redis, the rate-limit windows are kept in the
// same Redis, without a warning (policy check says so:
// cmd/delegateos TestPolicyCheckRatesInRedis); a Redis that cannot be
// reached is an error at start.
func TestRatesInRedis(t *testing.T) {
	srv := redistest.StartFsync(t, "no")
	pol := &policy.Policy{SpendStore: srv.URL(), Rate: policy.Rate{N: 2, Per: time.Minute}}
	core, logs := observer.New(zap.DebugLevel)
	rates, closeRates, err := openRates(pol, "spend_store", zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer closeRates()
	if _, ok := rates.(*ratelimit.Redis); !ok {
		t.Fatalf("openRates gave %T, want a *ratelimit.Redis", rates)
	}
	if logs.Len() != 0 {
		t.Errorf("openRates logged %v", logs.All())
	}
	if RatesPath(pol) != "" {
		t.Errorf("RatesPath %q, want none", RatesPath(pol))
	}
	k := []ratelimit.Key{{Limit: "policy", Level: "ISSUER"}}
	for i := range 3 {
		if _, err := rates.Reserve(k, time.Now()); (err == nil) != (i < 2) || (err != nil && !errors.Is(err, ratelimit.ErrLimited)) {
			t.Fatalf("call %d: %v", i, err)
		}
	}

	srv.Stop()
	if _, _, err := openRates(pol, "spend_store", zap.NewNop()); err == nil || !strings.Contains(err.Error(), "rate-limit") {
		t.Fatalf("openRates with Redis stopped: %v", err)
	}
}
