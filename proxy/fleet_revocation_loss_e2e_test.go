//go:build unix

package proxy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// revocationsHash is the Redis key of a revocation list.
const revocationsHash = "delegateos:revocations"

// workspace is the policy text of a proxy's own workspace, which holds its
// durable copy of the revocation list.
func (f *fleet) workspace(name string) string {
	return "workspace: " + strconv.Quote(filepath.Join(f.e.Dir, name)) + "\n"
}

// revokeB revokes B (its block 1) through the real binary, with more
// arguments for revoke.
func (f *fleet) revokeB(url string, more ...string) ([]byte, error) {
	key := filepath.Join(f.e.Dir, "root.key")
	if _, err := os.Stat(key); err != nil {
		key = f.e.KeyFile(f.e.Root)
	}
	args := append([]string{"revoke", "--key", key, "--list", url, "--id", f.b.RevocationIDs()[1]}, more...)
	return exec.Command(mcptest.Delegateos(f.t), args...).CombinedOutput()
}

// refusesB waits until s, a session on B, refuses B as revoked.
func refusesB(t *testing.T, s *mcptest.Session, what string) {
	t.Helper()
	mcptest.Eventually(t, what+" to refuse B", func() bool {
		typ, _ := denialData(s.Call(t, "echo", map[string]any{"text": "after"}))
		return typ == string(dct.Revoked)
	})
}

// FLUSHALL after a revoke: the proxies that hold the entry write it back,
// so a proxy started afterwards still refuses the token (before, Redis
// stayed empty and a new proxy forwarded the revoked token's calls).
func TestE2EFleetRevocationSurvivesFlushall(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	_, old := f.start(f.b, "", nil)
	old.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "B's call before the revoke")
	if out, err := f.revokeB(f.url); err != nil {
		t.Fatalf("delegateos revoke: %v\n%s", err, out)
	}
	refusesB(t, old, "the running proxy")
	ctx := context.Background()
	rc := f.srv.Client()
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "the running proxy to write the entry back", func() bool {
		n, err := rc.HLen(ctx, revocationsHash).Result()
		return err == nil && n == 1
	})
	refusesB(t, old, "the running proxy after FLUSHALL")
	refusesToStart(t, f, f.b)
}

// Redis loses its data while no proxy runs (FLUSHALL, as a restart
// without persistence would): a proxy with a workspace kept the list in
// it, so when it starts again it writes the entry back and refuses the
// revoked token, and a proxy started afterwards without a copy refuses it
// too (before, both started and forwarded the token's calls).
func TestE2EFleetRevocationSurvivesDataLossWithNoProxyRunning(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	ws := f.workspace("ws-b")
	p, s := f.start(f.b, ws, nil)
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "B's call")
	if out, err := f.revokeB(f.url); err != nil {
		t.Fatalf("delegateos revoke: %v\n%s", err, out)
	}
	// Refused once the entry is in the copy, which is written first.
	refusesB(t, s, "B's proxy")
	s.Close()
	p.WaitExit(mcptest.WaitTimeout)
	ctx := context.Background()
	f.srv.FlushAll()
	// B's proxy starts again on its workspace.
	pol := f.policy(ws)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.b, WantExit: func(code int) bool { return code == 2 }})
	if !p2.WaitExit(mcptest.WaitTimeout) || !strings.Contains(p2.Stderr.String(), "has been revoked") {
		t.Fatalf("B's proxy restarted on its workspace after the data loss: running or %s", p2.Stderr.String())
	}
	if n, err := f.srv.Client().HLen(ctx, revocationsHash).Result(); err != nil || n != 1 {
		t.Fatalf("after a proxy with a copy started: %d entries in Redis (%v), want B's written back", n, err)
	}
	refusesToStart(t, f, f.b)
}

// `revoke --replicas 1` succeeds only when a replica has the entry: on a
// server with none it fails, saying so.
func TestE2ERevokeReplicasWaits(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	out, err := f.revokeB(f.url, "--replicas", "1")
	if err == nil || !strings.Contains(string(out), "only 0 of the 1 replicas") {
		t.Fatalf("revoke --replicas 1 with no replica: %v\n%s", err, out)
	}
	c := redistest.StartCluster(t)
	f.url = c.URL()
	if out, err := f.revokeB(f.url, "--replicas", "1"); err != nil {
		t.Fatalf("revoke --replicas 1 on a cluster: %v\n%s", err, out)
	}
}

// A failover to a replica that never received the revocation (its link
// cut before the revoke, its primary then killed, the replica promoted by
// CLUSTER FAILOVER TAKEOVER): the running proxy writes the entry back to
// the new primary, and a proxy started afterwards refuses the token.
func TestE2EFleetRevocationSurvivesUnsyncedFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	f := newFleetOn(t, c.URL(), 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	_, old := f.start(f.b, "", nil)
	old.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "B's call before the revoke")
	primary, replica := c.PrimaryFor(revocationsHash)
	c.CutReplica(primary, replica)
	if out, err := f.revokeB(f.url); err != nil {
		t.Fatalf("delegateos revoke: %v\n%s", err, out)
	}
	refusesB(t, old, "the running proxy")
	primary.Stop()
	replica.Resume()
	c.Takeover(replica)
	ctx := context.Background()
	rc := replica.Client()
	mcptest.Eventually(t, "the running proxy to write the entry back to the promoted replica", func() bool {
		n, err := rc.HLen(ctx, revocationsHash).Result()
		return err == nil && n == 1
	})
	refusesB(t, old, "the running proxy after the failover")
	refusesToStart(t, f, f.b)
}
