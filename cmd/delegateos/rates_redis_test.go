package main

import (
	"errors"
	"os"
	"path/filepath"
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
// same Redis, without a warning, and policy check says so without the
// URL's password; a Redis that cannot be reached is an error at start.
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
	if ratesPath(pol) != "" {
		t.Errorf("ratesPath %q, want none", ratesPath(pol))
	}
	k := []ratelimit.Key{{Limit: "policy", Level: "ISSUER"}}
	for i := range 3 {
		if _, err := rates.Reserve(k, time.Now()); (err == nil) != (i < 2) || (err != nil && !errors.Is(err, ratelimit.ErrLimited)) {
			t.Fatalf("call %d: %v", i, err)
		}
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	os.WriteFile(file, []byte("roots: [iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w]\nrate: 5/1m\nspend_store: \"redis://:hunter2@127.0.0.1:1/0\"\n"), 0o600)
	code, out, errs := runCLI("policy", "check", file)
	if code != 0 || !strings.Contains(out, "rate-limit windows:") || !strings.Contains(out, "in Redis, shared by every proxy on redis://:xxxxx@127.0.0.1:1/0") || strings.Contains(out, "hunter2") {
		t.Fatalf("policy check: exit %d\n%s%s", code, out, errs)
	}

	srv.Stop()
	if _, _, err := openRates(pol, "spend_store", zap.NewNop()); err == nil || !strings.Contains(err.Error(), "rate-limit") {
		t.Fatalf("openRates with Redis stopped: %v", err)
	}
}
