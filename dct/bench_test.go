package dct

import (
	"crypto/ed25519"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
)

// The verification targets are relative to the cost of the Ed25519
// signature checks a token needs, one per block, measured in the same run:
// cold verification within 1.5× of that floor at 3 attenuations, cached
// verification under 2 µs at any length.

var floor struct {
	once sync.Once
	ns   float64
}

// TestMain measures the floor before any benchmark runs: testing.Benchmark
// deadlocks when called from inside a running benchmark.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		ed25519FloorNs()
	}
	os.Exit(m.Run())
}

// ed25519FloorNs is the cost of one Ed25519 verification of a 32-byte
// digest on this machine.
func ed25519FloorNs() float64 {
	floor.once.Do(func() {
		r := testing.Benchmark(BenchmarkEd25519Verify)
		floor.ns = float64(r.T.Nanoseconds()) / float64(r.N)
	})
	return floor.ns
}

func BenchmarkEd25519Verify(b *testing.B) {
	priv := rootKey.PrivateKey()
	pub := rootKey.Public()
	msg := make([]byte, 32)
	s := ed25519.Sign(priv, msg)
	for b.Loop() {
		if !ed25519.Verify(pub, msg, s) {
			b.Fatal("signature does not verify")
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	floorNs := ed25519FloorNs()
	for _, n := range []int{0, 1, 3, 8} {
		tok := chainN(b, n)
		s := tok.String()
		req := Request{Namespace: "docs", Action: "read", Resource: "/project/sub/a.txt", Now: t0}
		report := func(b *testing.B) {
			perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(perOp/(float64(n+1)*floorNs), "x-floor")
			b.ReportMetric(float64(len(s)), "token-bytes")
		}
		b.Run(fmt.Sprintf("cold/%d", n), func(b *testing.B) {
			// No cache: every iteration parses and checks every signature.
			v := mustVerifier(b, Options{CacheSize: -1})
			for b.Loop() {
				if _, err := v.Verify(s, req); err != nil {
					b.Fatal(err)
				}
			}
			report(b)
		})
		b.Run(fmt.Sprintf("cached/%d", n), func(b *testing.B) {
			v := mustVerifier(b, Options{})
			if _, err := v.Verify(s, req); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := v.Verify(s, req); err != nil {
					b.Fatal(err)
				}
			}
			report(b)
		})
	}
}
