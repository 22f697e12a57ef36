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
					runFleet(b, stores, inFlight)
				})
			}
		}
	}
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
// store, and reports the per-call time and the throughput.
func runFleet(b *testing.B, stores []Store, inFlight int) {
	var next atomic.Int64
	n := int64(b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, s := range stores {
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= n {
					r, err := s.Reserve(benchLevels, 100)
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
