//go:build unix

package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// One proxy of a fleet names a replica of the fleet's Redis (a read
// endpoint, a DNS name that moved) that takes writes (replica-read-only
// no). The replica holds the fleet's identity and the tree's stamp, so
// the proxy joined; its reservations stayed on the replica, never reached
// the primary, and were overwritten field by field by the primary's: two
// proxies alternating on a budget of 30 forwarded 57, no store_reset. And
// `revoke --list` on it wrote an entry the fleet on the primary never
// read. Now a spend store, revocation list, ended-delegation set or
// `revoke` whose server is a replica (INFO replication) is refused, naming
// its primary.
func TestE2EFaultStoreOnAReplicaRefused(t *testing.T) {
	f := newStoreFleet(t)
	replica := redistest.Start(t)
	ctx := context.Background()
	host, port, _ := strings.Cut(f.srv.Addr(), ":")
	rc := replica.Client()
	if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "replica-read-only", "no").Err(); err != nil {
		t.Fatal(err)
	}
	_, s1 := f.start(f.a, "", nil)
	drain(t, s1, 2)
	mcptest.Eventually(t, "the replica to hold the tree's stamp", func() bool {
		n, err := rc.Exists(ctx, "delegateos:stamp:{"+f.e.Root.ID()+"}").Result()
		return err == nil && n == 1
	})
	onReplica := func(url string) string { return strings.Replace(url, f.srv.Addr(), replica.Addr(), 1) }
	for _, c := range []struct {
		name  string
		store func(pol *mcptest.Policy)
	}{
		{"spend store", func(pol *mcptest.Policy) { pol.SpendStore = onReplica(pol.SpendStore) }},
		{"revocation list", func(pol *mcptest.Policy) { pol.RevocationList = onReplica(pol.RevocationList) }},
		{"ended-delegation set", func(pol *mcptest.Policy) {
			pol.Extra = f.workspace("ws-ended") + "ended_delegations: " + strconv.Quote(replica.URL()) + "\n"
		}},
	} {
		pol := f.policy("")
		c.store(pol)
		p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a, Dir: t.TempDir(), WantExit: func(code int) bool { return code == 2 }})
		if !p.WaitExit(mcptest.WaitTimeout) {
			t.Fatalf("a proxy whose %s is a writable replica started", c.name)
		}
		if !strings.Contains(p.Stderr.String(), "is a replica of "+f.srv.Addr()) {
			t.Fatalf("a proxy whose %s is a replica: %s", c.name, p.Stderr.String())
		}
	}
	if out, err := f.revokeB(replica.URL()); err == nil || !strings.Contains(string(out), "is a replica of "+f.srv.Addr()) {
		t.Fatalf("revoke --list on the replica: %v\n%s", err, out)
	}
	for _, s := range []*redistest.Server{f.srv, replica} {
		if n, err := s.Client().HLen(ctx, revocationsHash).Result(); err != nil || n != 0 {
			t.Fatalf("%s holds %d revocations (%v) after a refused revoke", s.Addr(), n, err)
		}
	}
}
