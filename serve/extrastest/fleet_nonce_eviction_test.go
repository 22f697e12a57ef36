//go:build unix

package extrastest

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// A fleet that shares only its revocation list on Redis spends its
// signature nonces there, and a spent nonce is a key with a time to live:
// the first key a volatile eviction policy drops (allkeys-* may drop it
// too). Before, only a spend store's Redis had its maxmemory-policy
// checked at start: on a revocation-list Redis with volatile-ttl the
// servers started, and once Redis filled and evicted the nonce, server B
// accepted (200) the signed request server A had accepted. Now the nonce
// store's policy is checked too, and the server refuses to start naming
// it; with noeviction it starts.
func TestFleetNonceStoreEvictionRefusedAtStart(t *testing.T) {
	e := mcptest.NewEnv(t)
	rs := redistest.Start(t)
	pol := e.Policy()
	pol.RevocationList = rs.URL()
	path := filepath.Join(e.Dir, "policy.yaml")
	mcptest.WriteFile(t, path, pol.YAML())
	for _, policy := range []string{"volatile-ttl", "allkeys-lru"} {
		if err := rs.Client().ConfigSet(context.Background(), "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		// A server that starts is killed once the wait is over: it must not.
		ctx, cancel := context.WithTimeout(context.Background(), mcptest.WaitTimeout)
		out, err := exec.CommandContext(ctx, mcptest.Delegateos(t), "serve", "--listen", "127.0.0.1:0", "--policy", path, "--require-signature", "--", mcptest.Docserver(t), "--root", e.Docs).CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		errs, code := string(out), 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if timedOut || code != 2 || !strings.Contains(errs, "maxmemory-policy "+policy) || !strings.Contains(errs, "nonces") {
			t.Fatalf("a server whose nonce store has maxmemory-policy %s: exit %d, %s", policy, code, errs)
		}
	}
	if err := rs.Client().ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature"}})
}
