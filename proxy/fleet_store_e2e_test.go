//go:build unix

package proxy_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/redis/go-redis/v9"
)

// What the tests of a fleet's store losing data share (fleet_store_*):
// the fleet they start from, a second tree on its store, its snapshots
// and calls until a refusal.

// newStoreFleet is the fleet of the store-loss tests: every level's budget
// is 30 calls.
func newStoreFleet(t *testing.T) *fleet {
	t.Helper()
	return newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
}

// otherRoot is a second fleet of the same budgets on f's store: another
// root, and so another delegation tree (another fleet, or a second
// trusted root of the same one).
func (f *fleet) otherRoot() *fleet {
	f.t.Helper()
	o := newFleetOn(f.t, f.url, 30*fleetCost, 30*fleetCost, 30*fleetCost)
	o.srv = f.srv
	return o
}

// audited is the policy text that has a proxy sign receipts with a key of
// its own (named name) into the audit log at log.
func (f *fleet) audited(name, log string) string {
	f.t.Helper()
	return "proxy_key: " + f.e.KeyFile(mcptest.NewKey(f.t, name)) + "\naudit_log: " + log + "\n"
}

// seenFiles returns the *.seen.json files of the test's state directory.
func (f *fleet) seenFiles() []string {
	f.t.Helper()
	m, err := filepath.Glob(filepath.Join(f.e.Dir, "state", "*.seen.json"))
	if err != nil || len(m) == 0 {
		f.t.Fatalf("no seen.json in the state directory: %v", err)
	}
	return m
}

// storeSnapshot is every delegateos key of the server, as DUMP returns
// it: an RDB snapshot of the fleet's data.
type storeSnapshot map[string]string

// snapshot takes a storeSnapshot of the fleet's store.
func (f *fleet) snapshot() storeSnapshot {
	f.t.Helper()
	ctx := context.Background()
	c := f.srv.Client()
	keys, err := c.Keys(ctx, "delegateos:*").Result()
	if err != nil || len(keys) == 0 {
		f.t.Fatalf("the fleet's keys: %v %v", keys, err)
	}
	s := storeSnapshot{}
	for _, k := range keys {
		d, err := c.Dump(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			// Gone since KEYS: an open-reservations hash whose last
			// reservation a background commit just ended, a void key
			// expired. Not in the snapshot, as it is not in the store.
			continue
		}
		if err != nil {
			f.t.Fatal(err)
		}
		s[k] = d
	}
	return s
}

// restore replaces the server's data by the snapshot, at once, as a
// restart of Redis from an older dump.rdb (or a failover to a replica
// that had not caught up) does.
func (f *fleet) restore(s storeSnapshot) {
	f.t.Helper()
	ctx := context.Background()
	_, err := f.srv.Client().TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.FlushAll(ctx)
		for k, d := range s {
			p.Restore(ctx, k, 0, d)
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// drain calls echo until a call is refused, at most max times, and
// returns how many were forwarded and the refusal's type and detail.
func drain(t *testing.T, s *mcptest.Session, max int) (forwarded int64, typ, detail string) {
	t.Helper()
	for range max {
		r := s.Call(t, "echo", map[string]any{"text": "drain"})
		if r.Err == nil && !r.Res.IsError {
			forwarded++
			continue
		}
		typ, detail = denialData(r)
		return forwarded, typ, detail
	}
	return forwarded, "", ""
}

// settled waits until no call of the tree is reserved in the store.
func (f *fleet) settled() {
	f.t.Helper()
	mcptest.Eventually(f.t, "the calls settled", func() bool { return f.usage()[f.key(1)].Reserved == 0 })
}

// startRefused starts a proxy on A that must refuse to start (exit 2),
// and returns what it wrote on stderr; what says on what it must not
// start, for the failure.
func (f *fleet) startRefused(what string) string {
	f.t.Helper()
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, WantExit: func(code int) bool { return code == 2 }})
	if !p.WaitExit(mcptest.WaitTimeout) {
		f.t.Fatal(strings.TrimSpace("the proxy started " + what))
	}
	return p.Stderr.String()
}
