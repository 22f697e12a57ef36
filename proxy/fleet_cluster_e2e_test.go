//go:build unix

package proxy_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
	"github.com/delegateos/delegateos/ratelimit"
)

// A fleet on a Redis Cluster (three primaries, three replicas, given as
// redis+cluster:// with every node a seed): proxies on A, B and C call in
// parallel, and the primary that holds the tree's spend is failed over to
// its replica (CLUSTER FAILOVER) in the middle of the burst, then the
// one that holds the revocation list. No level forwards past its budget,
// the store charges at least every forwarded call, a refusal is only
// budget_exceeded or store_unavailable, and a delegation revoked before
// the failovers is refused by the proxy that was running and by one
// started after.
func TestE2EFleetClusterFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	const limA, limB, limC = 300, 200, 80
	f := newFleetOn(t, c.URL(), limA*fleetCost, limB*fleetCost, limC*fleetCost)
	// D is a sibling of B under A, revoked before the burst.
	kd := mcptest.NewKey(t, "d")
	budgetD := int64(10 * fleetCost)
	d, err := dct.Attenuate(f.a, dct.AttenuateParams{Attenuator: f.e.Agent, Delegatee: kd.ID(),
		DelegationID: mcptest.NewDelegationID(), MaxBudgetMicrocents: &budgetD})
	if err != nil {
		t.Fatal(err)
	}
	_, sd := f.start(d, "", nil)
	sd.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "D's call before its revoke")
	out, err := exec.Command(mcptest.Delegateos(t), "revoke", "--key", f.e.KeyFile(f.e.Root), "--list", c.URL(),
		"--id", d.RevocationIDs()[1]).CombinedOutput()
	if err != nil {
		t.Fatalf("delegateos revoke: %v\n%s", err, out)
	}
	revoked := func(s *mcptest.Session, what string) {
		t.Helper()
		r := s.Call(t, "echo", map[string]any{"text": "after"})
		if typ, _ := denialData(r); typ != string(dct.Revoked) {
			t.Fatalf("%s: %+v, want revoked", what, r)
		}
	}
	mcptest.Eventually(t, "D's proxy to refuse D", func() bool {
		typ, _ := denialData(sd.Call(t, "echo", map[string]any{"text": "after"}))
		return typ == string(dct.Revoked)
	})

	toks := []*dct.Token{f.a, f.b, f.c}
	sessions := make([]*mcptest.Session, 3)
	for i, tok := range toks {
		_, sessions[i] = f.start(tok, "", nil)
	}
	treePrimary, treeReplica := c.PrimaryFor("{" + f.e.Root.ID() + "}")
	revPrimary, revReplica := c.PrimaryFor("delegateos:revocations")
	t.Logf("the tree's spend is on %s (replica %s), the revocation list on %s (replica %s)",
		treePrimary.Addr(), treeReplica.Addr(), revPrimary.Addr(), revReplica.Addr())

	var allowed [3]atomic.Int64
	var unavailable atomic.Int64
	started := make(chan struct{})
	var startOnce sync.Once
	failedOver := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each worker calls until its level is spent after the
				// failover. The last 50 calls of the root's budget wait
				// for the failover, so that the budget runs out on the
				// new primary.
				for j := 0; ; j++ {
					r := sessions[i].Call(t, "echo", map[string]any{"text": fmt.Sprintf("%d-%d-%d", i, w, j)})
					typ, detail := denialData(r)
					switch {
					case r.Err == nil && !r.Res.IsError:
						allowed[i].Add(1)
						total := allowed[0].Load() + allowed[1].Load() + allowed[2].Load()
						if total >= 30 {
							startOnce.Do(func() { close(started) })
						}
						if total >= limA-50 {
							<-failedOver
						}
						continue
					case typ == string(gate.StoreUnavailable):
						unavailable.Add(1)
						continue
					case typ == string(dct.BudgetExceeded):
						select {
						case <-failedOver:
							return
						default:
							<-failedOver // and call again on the new primary
							continue
						}
					}
					t.Errorf("proxy %d call %d: %v (%s: %s), want allowed, budget_exceeded or store_unavailable", i, j, r.Err, typ, detail)
					return
				}
			}()
		}
	}
	<-started
	before := allowed[0].Load() + allowed[1].Load() + allowed[2].Load()
	c.Failover(treeReplica)
	during := allowed[0].Load() + allowed[1].Load() + allowed[2].Load()
	close(failedOver)
	wg.Wait()
	t.Logf("%d calls allowed when the failover began, %d when it ended", before, during)
	if revPrimary != treePrimary {
		c.Failover(revReplica)
	}
	nA, nB, nC := allowed[0].Load(), allowed[1].Load(), allowed[2].Load()
	t.Logf("allowed: %d under A, %d under B, %d under C; %d refused store_unavailable during the failover", nA, nB, nC, unavailable.Load())

	u := f.usage()
	for _, lv := range []struct {
		key          string
		calls, limit int64
	}{
		{f.key(1), nA + nB + nC + 1, limA}, // and D's one call
		{f.key(2), nB + nC, limB},
		{f.key(3), nC, limC},
	} {
		got := u[lv.key]
		if lv.calls > lv.limit {
			t.Errorf("%s: %d calls forwarded, over its budget of %d", lv.key, lv.calls, lv.limit)
		}
		if got.Committed+got.Reserved < lv.calls*fleetCost || got.Committed > lv.limit*fleetCost {
			t.Errorf("%s: committed %d, reserved %d; want at least the %d forwarded calls (%d) charged, at most the budget", lv.key, got.Committed, got.Reserved, lv.calls, lv.calls*fleetCost)
		}
	}
	// The revocation held through both failovers: the proxy that was
	// running refuses D, and so does one started now.
	revoked(sd, "D's proxy after the failovers")
	refusesToStart(t, f, d)
}

// refusesToStart starts a proxy on tok, revoked, and waits for it to
// refuse to start (status 2) saying so.
func refusesToStart(t *testing.T, f *fleet, tok *dct.Token) {
	t.Helper()
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: tok, WantExit: func(code int) bool { return code == 2 }})
	if !p.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("a proxy started on a revoked token is running")
	}
	if !strings.Contains(p.Stderr.String(), "has been revoked") {
		t.Fatalf("a proxy started on a revoked token: status %d, %s", p.ExitCode(), p.Stderr.String())
	}
}

// Every Redis store works on a Redis Cluster: a file store migrated into
// it (`delegateos store migrate`), spend on three trees on three
// different primaries (and `delegateos spend`, which scans every primary,
// reports them all), rate-limit windows, signature nonces, and
// the ended-delegation set.
func TestClusterEveryStore(t *testing.T) {
	c := redistest.StartCluster(t)
	url := c.URL()
	seen := map[*redistest.Server]bool{}
	var issuers []string
	for i := 0; len(issuers) < 3; i++ {
		iss := fmt.Sprintf("ISSUER%d", i)
		if p, _ := c.PrimaryFor("{" + iss + "}"); !seen[p] {
			seen[p] = true
			issuers = append(issuers, iss)
		}
	}
	// A file store's spend on trees of other issuers, on three shards,
	// migrated into the cluster.
	file := filepath.Join(t.TempDir(), "spend.log")
	fs, err := budget.OpenFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, iss := range issuers {
		r, err := fs.Reserve([]budget.Level{{Key: "M" + iss + "/del_root", Limit: 1000}}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Commit(r, 100); err != nil {
			t.Fatal(err)
		}
	}
	fs.Close()
	if out, err := exec.Command(mcptest.Delegateos(t), "store", "migrate", "--from", file, "--to", url).CombinedOutput(); err != nil {
		t.Fatalf("delegateos store migrate to the cluster: %v\n%s", err, out)
	}
	s, err := budget.OpenRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, iss := range issuers {
		levels := []budget.Level{{Key: iss + "/del_root", Limit: 1000}, {Key: iss + "/del_root/del_a", Limit: 700}}
		r, err := s.Reserve(levels, 300)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(r, 300); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reserve(levels, 300); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reserve(levels, 200); err == nil {
			t.Fatalf("%s: a reservation past the budget: %v", iss, err)
		}
	}
	out, err := exec.Command(mcptest.Delegateos(t), "spend", "--store", url).CombinedOutput()
	if err != nil {
		t.Fatalf("delegateos spend: %v\n%s", err, out)
	}
	for _, iss := range issuers {
		if !strings.Contains(string(out), iss+"/del_root/del_a") || !strings.Contains(string(out), "M"+iss+"/del_root") {
			t.Errorf("delegateos spend lacks %s's tree:\n%s", iss, out)
		}
	}

	rl, err := ratelimit.OpenRedis(url, map[string]ratelimit.Limit{"r": {N: 2, Per: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	for _, iss := range issuers {
		keys := []ratelimit.Key{{Limit: "r", Level: iss + "/del_root"}, {Limit: "r", Level: iss + "/del_root/del_a"}}
		for range 2 {
			if _, err := rl.Reserve(keys, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := rl.Reserve(keys, time.Now()); !errors.Is(err, ratelimit.ErrLimited) {
			t.Fatalf("%s: a third call in a window of 2: %v", iss, err)
		}
	}

	ns, err := avpsig.OpenRedisNonces(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ns.Join(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(nil)
	now := time.Now()
	n := avpsig.Nonce{Signer: pub, DID: identity.DIDFromPublicKey(pub), Nonce: strings.Repeat("ab", 16), Now: now, Expires: now.Add(time.Minute)}
	if err := ns.Spend(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := ns.Spend(ctx, n); err == nil {
		t.Fatal("a nonce spent twice on the cluster")
	}

	local, err := chain.OpenFile(filepath.Join(t.TempDir(), "delegations.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := chain.OpenShared(local, url)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if _, err := chain.LoadEnded(url); err != nil {
		t.Fatal(err)
	}
}

// A spend store named by one node's redis:// URL, a node that does not
// hold the tree: Redis answers MOVED, and the call is refused
// store_unavailable, saying to name the cluster — not budget_exceeded,
// which a client would read as a budget spent. When a key the store reads
// at start (its identity) is not on that node either, which depends on the
// cluster's slots, the proxy refuses to start, saying the same.
func TestE2EClusterNodeURLIsNotBudgetExceeded(t *testing.T) {
	c := redistest.StartCluster(t)
	f := newFleetOn(t, c.URL(), 10*fleetCost, 10*fleetCost, 10*fleetCost)
	owner, replica := c.PrimaryFor("{" + f.e.Root.ID() + "}")
	var other *redistest.Server
	for _, n := range c.Nodes {
		if n != owner && n != replica {
			other = n
			break
		}
	}
	pol := f.policy("")
	pol.SpendStore = other.URL()
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a, WantExit: func(code int) bool { return code == 0 || code == 2 }})
	c2 := newLineClient(t, p)
	c2.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	init, ok := c2.until(mcptest.CallTimeout, func(l string) bool { return strings.Contains(l, `"id":"init"`) })
	if !ok || strings.Contains(init, `"error"`) {
		// Not started (no answer, or an error answer to initialize).
		if !p.WaitExit(mcptest.WaitTimeout) {
			t.Fatalf("no answer to initialize, and the proxy is running: %q", init)
		}
		if p.ExitCode() != 2 || !strings.Contains(p.Stderr.String()+init, "redis+cluster://") {
			t.Fatalf("the proxy stopped with status %d, %s %s; want it to name redis+cluster://", p.ExitCode(), p.Stderr.String(), init)
		}
		return
	}
	c2.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c2.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	r := c2.response()
	var m struct {
		Error struct {
			Data struct{ Type, Detail string }
		}
	}
	_ = json.Unmarshal([]byte(r), &m)
	if m.Error.Data.Type != string(gate.StoreUnavailable) || !strings.Contains(m.Error.Data.Detail, "redis+cluster://") {
		t.Fatalf("a call through a node that does not hold the tree: %s, want store_unavailable naming redis+cluster://", r)
	}
}
