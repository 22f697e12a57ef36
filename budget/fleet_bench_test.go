package budget

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redistest"
)

// fleetInFlight is how many calls each proxy has in flight in the
// pipelined runs: an agent's session with parallel tool calls.
const fleetInFlight = 16

// BenchmarkFleet is `make bench-fleet`: the spend store's work for one
// tools/call as the gate does it (Reserve of three levels, which also
// refuses a spent leaf, then Commit, at a cost of 100 microcents) with the Redis store and the
// File store, for 1 and 3 proxies, each proxy its own Store:
//
//   - serial: each proxy makes one call at a time; ns/call is the
//     per-call cost (latency);
//   - pipelined: each proxy keeps fleetInFlight calls in flight;
//     calls/s is the fleet's throughput, calls/s/proxy one proxy's.
//
// The Redis proxies share one budget tree on one redis-server: appendonly
// yes and appendfsync always, as the README recommends ("redis"), or
// appendfsync everysec ("redis-everysec"). Files cannot be
// shared: each File proxy has its own file, and so its own budget.
//
// The trees=3 rows put three proxies on three trees (three issuers), on
// one redis-server and on a Redis Cluster of three primaries with a
// replica each (redis+cluster://, every node appendfsync always), where
// the trees' keys are on three different primaries: what spreading a
// fleet's trees over shards buys.
//
// ping is one Redis round trip (PING) on the same machine, for scale: a
// call's spend-store work with Redis is one round trip before the call
// is forwarded (the Reserve script; the gate reads the leaf's spend only
// to choose between two denials) and none after (a commit at the reserved
// cost rides in the next reserve or is sent in the background, batched).
func BenchmarkFleet(b *testing.B) {
	b.Run("ping", func(b *testing.B) {
		c := redistest.Start(b).Client()
		ctx := context.Background()
		for b.Loop() {
			if err := c.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, kind := range []string{"file", "redis", "redis-everysec"} {
		for _, proxies := range []int{1, 3} {
			for _, mode := range []string{"serial", "pipelined"} {
				b.Run(fmt.Sprintf("store=%s/proxies=%d/%s", kind, proxies, mode), func(b *testing.B) {
					stores := fleetStores(b, kind, proxies)
					inFlight := 1
					if mode == "pipelined" {
						inFlight = fleetInFlight
					}
					runFleet(b, stores, [][]Level{benchLevels}, inFlight)
				})
			}
		}
	}
	// Three proxies on three trees: on one Redis, and on a Redis Cluster
	// (three primaries with a replica each) with the trees on different
	// primaries.
	for _, kind := range []string{"redis", "redis-cluster"} {
		for _, mode := range []string{"serial", "pipelined"} {
			b.Run(fmt.Sprintf("store=%s/proxies=3/trees=3/%s", kind, mode), func(b *testing.B) {
				var url string
				var trees [][]Level
				switch kind {
				case "redis":
					url = redistest.Start(b).URL()
					trees = benchTrees(nil)
				case "redis-cluster":
					c := redistest.StartCluster(b)
					url = c.URL()
					trees = benchTrees(c)
				}
				var stores []Store
				for range 3 {
					stores = append(stores, openRedis(b, url))
				}
				inFlight := 1
				if mode == "pipelined" {
					inFlight = fleetInFlight
				}
				runFleet(b, stores, trees, inFlight)
			})
		}
	}
}

// benchTrees returns three trees of three levels, as benchLevels, under
// three issuers; with a cluster, issuers whose keys are on three
// different primaries.
func benchTrees(c *redistest.Cluster) [][]Level {
	var trees [][]Level
	seen := map[*redistest.Server]bool{}
	for i := 0; len(trees) < 3; i++ {
		issuer := fmt.Sprintf("ISSUER%d", i)
		if c != nil {
			p, _ := c.PrimaryFor("{" + issuer + "}")
			if seen[p] {
				continue
			}
			seen[p] = true
		}
		var tree []Level
		for _, l := range benchLevels {
			tree = append(tree, Level{Key: issuer + l.Key[len("ISSUER"):], Limit: l.Limit})
		}
		trees = append(trees, tree)
	}
	return trees
}

// fleetStores opens one store per proxy.
func fleetStores(b *testing.B, kind string, proxies int) []Store {
	var stores []Store
	var url string
	switch kind {
	case "redis":
		url = redistest.Start(b).URL()
	case "redis-everysec":
		url = redistest.StartFsync(b, "everysec").URL()
	}
	for i := range proxies {
		switch kind {
		case "file":
			stores = append(stores, openFile(b, filepath.Join(tempDir(b), fmt.Sprintf("spend%d.log", i))))
		default:
			stores = append(stores, openRedis(b, url))
		}
	}
	return stores
}

// runFleet makes b.N calls spread over the stores, inFlight at a time per
// store, store i calling on trees[i % len(trees)], and reports the
// per-call time and the throughput.
func runFleet(b *testing.B, stores []Store, trees [][]Level, inFlight int) {
	var next atomic.Int64
	n := int64(b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, s := range stores {
		levels := trees[i%len(trees)]
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= n {
					r, err := s.Reserve(levels, 100)
					if err != nil {
						b.Error(err)
						return
					}
					if err := s.Commit(r, 100); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	perSec := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(perSec, "calls/s")
	b.ReportMetric(perSec/float64(len(stores)), "calls/s/proxy")
	// The time one call takes from its caller's view.
	b.ReportMetric(float64(elapsed.Nanoseconds())*float64(len(stores)*inFlight)/float64(b.N), "ns/call")
}
