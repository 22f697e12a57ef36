// Command revlist writes a revocation list file of n signed entries that
// name no real token's block, for the tests and benchmarks of large lists.
// The entries are signed by a key derived from -seed, on every core.
//
// Usage:
//
//	revlist -n 100000 -o revocations.json
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/revocation"
)

func main() {
	n := flag.Int("n", 100_000, "the number of entries")
	out := flag.String("o", "", "the list file to write (required)")
	seed := flag.Uint("seed", 7, "the byte the signing key's seed repeats")
	flag.Parse()
	if *out == "" || *n < 0 || *seed > 255 || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := write(*out, *n, byte(*seed)); err != nil {
		fmt.Fprintln(os.Stderr, "revlist:", err)
		os.Exit(1)
	}
}

func write(path string, n int, seed byte) error {
	k, err := identity.FromSeed(bytes.Repeat([]byte{seed}, 32), "revlist")
	if err != nil {
		return err
	}
	entries, err := sign(k, n, time.Now())
	if err != nil {
		return err
	}
	data, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// sign makes entry i revoke the block ID SHA-256("unrelated block i").
func sign(k *identity.Keypair, n int, at time.Time) ([]revocation.Entry, error) {
	entries := make([]revocation.Entry, n)
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				id := sha256.Sum256([]byte("unrelated block " + strconv.Itoa(i)))
				if entries[i], errs[w] = revocation.NewEntry(k, b64.Encode(id[:]), revocation.ScopeChain, at); errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return entries, nil
}
