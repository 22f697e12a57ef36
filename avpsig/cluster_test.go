//go:build unix

package avpsig

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/redistest"
)

// On a Redis Cluster, a nonce's key (hash tag: the signer) and its tree's
// set (hash tag: the tree) are in different slots: one script over both
// was refused (CROSSSLOT), and so was every signed request with a token.
// The store spends in two scripts there, and keeps every guarantee: the
// tree's bound, a nonce accepted once whatever tree its request claims,
// and replays that do not fill another tree.
func TestRedisNoncesOnCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	s := openNonces(t, c.URL())
	s.MaxPerTree = 3
	ctx := context.Background()
	if err := s.Join(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(nil)
	now := time.Now()
	nonce := func(i int, tree string) Nonce {
		return Nonce{Signer: pub, DID: identity.DIDFromPublicKey(pub), Tree: tree, Nonce: fmt.Sprintf("%032d", i), Now: now, Expires: now.Add(time.Minute)}
	}
	for i := range 3 {
		if err := s.Spend(ctx, nonce(i, "tree-a")); err != nil {
			t.Fatalf("nonce %d of tree-a: %v", i, err)
		}
	}
	if err := s.Spend(ctx, nonce(3, "tree-a")); reason(err) != ReasonBusy {
		t.Fatalf("a fourth nonce of tree-a (bound 3): %v, want busy", err)
	}
	// Replays, with this tree's token and with other trees': refused, and
	// they leave tree-b as they found it.
	for _, tree := range []string{"tree-a", "tree-b", "tree-b", "tree-c"} {
		if err := s.Spend(ctx, nonce(0, tree)); reason(err) != ReasonReplayed {
			t.Fatalf("nonce 0 again, in %s: %v, want replayed", tree, err)
		}
	}
	if err := s.Spend(ctx, nonce(4, "tree-a")); reason(err) != ReasonBusy {
		t.Fatalf("tree-a after a replay in it: %v, want still busy", err)
	}
	for i := 10; i < 13; i++ {
		if err := s.Spend(ctx, nonce(i, "tree-b")); err != nil {
			t.Fatalf("nonce %d of tree-b after replays claimed it: %v", i, err)
		}
	}
	// One nonce spent at once in twenty trees: accepted once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, replayed := 0, 0
	for k := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Spend(ctx, nonce(99, fmt.Sprint("race-", k)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case reason(err) == ReasonReplayed:
				replayed++
			default:
				t.Errorf("tree %d: %v", k, err)
			}
		}()
	}
	wg.Wait()
	if ok != 1 || replayed != 19 {
		t.Fatalf("one nonce in twenty trees at once: %d accepted, %d replayed", ok, replayed)
	}
}
