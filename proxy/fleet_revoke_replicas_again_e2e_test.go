//go:build unix

package proxy_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// replicaOffset returns the replication offset the primary reports for
// its first replica (INFO replication, slave0's offset), and the
// primary's own.
func replicaOffset(t *testing.T, primary *redistest.Server) (replica, own int64) {
	t.Helper()
	info, err := primary.Client().Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`slave0:[^\r\n]*offset=(\d+)`).FindStringSubmatch(info)
	o := regexp.MustCompile(`master_repl_offset:(\d+)`).FindStringSubmatch(info)
	if m == nil || o == nil {
		t.Fatalf("no replica in the primary's INFO replication:\n%s", info)
	}
	replica, _ = strconv.ParseInt(m[1], 10, 64)
	own, _ = strconv.ParseInt(o[1], 10, 64)
	return replica, own
}

// `revoke --replicas 1` run again, as its own failure message says to,
// while the replica still lags (stopped, its link up): the entry is in
// the primary already, so the second run wrote nothing, and WAIT on a
// connection that wrote nothing returns at once with every connected
// replica. It said the entry was durable while the replica lacked it
// (before: exit 0, the replica's offset behind the entry's); now the run
// writes the entry again (the same value) on the connection it waits on,
// and fails as the first did until the replica has it.
func TestE2EFaultRevokeReplicasAgainWaits(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	replica := redistest.Start(t)
	ctx := context.Background()
	host, port, _ := strings.Cut(f.srv.Addr(), ":")
	if err := replica.Client().Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the replica to be in sync", func() bool {
		info, err := replica.Client().Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up\r\n") {
			return false
		}
		r, own := replicaOffset(t, f.srv)
		return r == own
	})
	// The replica lags from now on: stopped, its link still up.
	replica.Pause()
	out, err := f.revokeB(f.url, "--replicas", "1")
	if err == nil || !strings.Contains(string(out), "only 0 of the 1 replicas") {
		t.Fatalf("revoke --replicas 1 with the replica stopped: %v\n%s", err, out)
	}
	out, err = f.revokeB(f.url, "--replicas", "1")
	lag, own := replicaOffset(t, f.srv)
	if err == nil {
		t.Fatalf("revoke --replicas 1 run again succeeded while the replica lagged (its offset %d, the primary's %d): %s", lag, own, out)
	}
	if !strings.Contains(string(out), "only 0 of the 1 replicas") {
		t.Fatalf("revoke --replicas 1 run again: %v\n%s", err, out)
	}
	// Once the replica catches up, running it again succeeds.
	replica.Resume()
	if out, err := f.revokeB(f.url, "--replicas", "1"); err != nil {
		t.Fatalf("revoke --replicas 1 with the replica caught up: %v\n%s", err, out)
	}
	n, err := replica.Client().HLen(ctx, revocationsHash).Result()
	if err != nil || n != 1 {
		t.Fatalf("the replica holds %d entries (%v), want B's", n, err)
	}
}
