package avpsig

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redistest"
)

// The holder of one token can attenuate it to as many keys as she likes,
// so nonces are bounded per delegation tree, not per key: eleven keys of
// one tree together hold no more than the tree's bound, and a signer of
// another tree is unaffected. A nonce is still one signer's: the same
// signature presented with another tree's token is a replay.
func TestNoncesBoundedPerTree(t *testing.T) {
	rs := redistest.Start(t)
	for _, c := range []struct {
		name string
		v    *Verifier
	}{
		{"memory", &Verifier{Now: func() time.Time { return t0 }, MaxNonces: 30, MaxNoncesPerTree: 10}},
		{"redis", &Verifier{Now: func() time.Time { return t0 }, Store: func() NonceStore {
			s := openNonces(t, rs.URL())
			s.MaxPerTree = 10
			return s
		}()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := c.v
			accepted := 0
			for k := range 11 {
				key := testKey(byte(100 + k))
				for n := range 3 {
					err := v.VerifyInTree(signed(t, key, t0, byte(n), "GET", "/", ""), nil, did(key), "tree-a")
					switch reason(err) {
					case ReasonBusy:
					default:
						if err != nil {
							t.Fatalf("key %d, nonce %d: %v", k, n, err)
						}
						accepted++
					}
				}
			}
			if accepted != 10 {
				t.Fatalf("eleven keys of one tree spent %d nonces, want the tree's 10", accepted)
			}
			other := testKey(1)
			if err := v.VerifyInTree(signed(t, other, t0, 1, "GET", "/", ""), nil, did(other), "tree-b"); err != nil {
				t.Fatalf("a signer of another tree: %v", err)
			}
			if err := v.VerifyInTree(signed(t, other, t0, 1, "GET", "/", ""), nil, did(other), "tree-c"); reason(err) != ReasonReplayed {
				t.Fatalf("the same signature in another tree: %v, want replayed", err)
			}
		})
	}
}

// A tree's nonces leave its count once their window has passed, in Redis
// as in memory.
func TestRedisTreeCountForgetsExpired(t *testing.T) {
	rs := redistest.Start(t)
	s := openNonces(t, rs.URL())
	s.MaxPerTree, s.Skew = 2, 0
	ctx := context.Background()
	now := time.Now()
	spend := func(k byte, nonce string, at time.Time) error {
		key := testKey(k)
		return s.Spend(ctx, Nonce{Signer: key.Public().(ed25519.PublicKey), DID: did(key), Tree: "t", Nonce: nonce, Now: at, Expires: at.Add(time.Second)})
	}
	for i, n := range []string{"a", "b"} {
		if err := spend(byte(i+1), n, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := spend(3, "c", now); reason(err) != ReasonBusy {
		t.Fatalf("a third nonce of a tree bounded at 2: %v", err)
	}
	later := now.Add(2 * time.Second)
	if err := spend(3, "c", later); err != nil {
		t.Fatalf("once the first two have expired: %v", err)
	}
	if n, err := rs.Client().ZCard(ctx, treeKeyPrefix+"{t}").Result(); err != nil || n != 1 {
		t.Fatalf("the tree's set holds %d members (%v), want 1", n, err)
	}
}

// A timestamp ahead of the verifier's clock by more than MaxAhead is
// refused: within the window it would keep its nonce held for up to twice
// the window, so that a flood of them holds the tree's nonces longer.
func TestFutureTimestampRefused(t *testing.T) {
	holder := testKey(1)
	v := &Verifier{Now: func() time.Time { return t0 }}
	get := func(at time.Time, n byte) *http.Request { return signed(t, holder, at, n, "GET", "/", "") }
	if err := v.Verify(get(t0.Add(DefaultMaxAhead), 1), nil, did(holder)); err != nil {
		t.Fatalf("%s ahead: %v", DefaultMaxAhead, err)
	}
	err := v.Verify(get(t0.Add(DefaultMaxAhead+time.Second), 2), nil, did(holder))
	if reason(err) != ReasonStale || !strings.Contains(err.Error(), "ahead") {
		t.Fatalf("%s ahead: %v, want stale", DefaultMaxAhead+time.Second, err)
	}
	if err := v.Verify(get(t0.Add(-DefaultWindow), 3), nil, did(holder)); err != nil {
		t.Fatalf("a window behind: %v", err)
	}
	short := &Verifier{Now: func() time.Time { return t0 }, Window: 2 * time.Second, MaxAhead: time.Minute}
	if err := short.Verify(get(t0.Add(3*time.Second), 4), nil, did(holder)); reason(err) != ReasonStale {
		t.Fatalf("ahead by more than a short window: %v", err)
	}
	if v.Nonces() != 2 {
		t.Fatalf("%d nonces held, want 2", v.Nonces())
	}
}

// A holder with many root-issued tokens holds as many trees: when they
// all take what they can at once, the memory store never fills, and a
// tree holding no nonce finds a place (fair share of the free places;
// found by the rtnonce red team: three trees at the per-tree bound filled
// the store).
func TestMemoryNoncesFairShare(t *testing.T) {
	store := &MemoryNonces{Max: 30, MaxPerTree: 30}
	v := &Verifier{Now: func() time.Time { return t0 }, Store: store}
	for n := range 30 {
		for k := range 6 {
			key := testKey(byte(100 + k))
			err := v.VerifyInTree(signed(t, key, t0, byte(n), "GET", "/", ""), nil, did(key), "greedy-"+string(rune('a'+k)))
			if err != nil && reason(err) != ReasonBusy {
				t.Fatalf("tree %d, nonce %d: %v", k, n, err)
			}
		}
	}
	if held := store.Len(); held >= 30 {
		t.Fatalf("six greedy trees hold %d nonces, the whole store", held)
	}
	other := testKey(1)
	if err := v.VerifyInTree(signed(t, other, t0, 1, "GET", "/", ""), nil, did(other), "tree-b"); err != nil {
		t.Fatalf("a signer of another tree, after six greedy trees: %v", err)
	}
}

// Red team (rtnonce), held: the Redis spend script under concurrency.
// Forty spends of one signer's nonce, each claiming another tree: exactly
// one is accepted. Forty distinct nonces of one tree bounded at 10 from
// eight connections: exactly ten accepted, the rest busy.
// (Was TestRedteamRedisTreeScriptConcurrent.)
func TestRedisTreeScriptConcurrent(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	key := testKey(7)
	pub := key.Public().(ed25519.PublicKey)
	run := func(s *RedisNonces, n int, mk func(i int) Nonce) map[Reason]int {
		var mu sync.Mutex
		got := map[Reason]int{}
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Spend(ctx, mk(i))
				r := Reason("ok")
				if err != nil {
					r = reason(err)
				}
				mu.Lock()
				got[r]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		return got
	}
	now := time.Now()
	s := openNonces(t, rs.URL())
	s.MaxPerTree = 10
	got := run(s, 40, func(i int) Nonce {
		return Nonce{Signer: pub, DID: did(key), Tree: fmt.Sprint("tree", i), Nonce: "00112233445566778899aabbccddeeff", Now: now, Expires: now.Add(time.Minute)}
	})
	if got["ok"] != 1 || got[ReasonReplayed] != 39 {
		t.Fatalf("one nonce in 40 trees at once: %v", got)
	}
	got = run(s, 40, func(i int) Nonce {
		k := testKey(byte(20 + i))
		return Nonce{Signer: k.Public().(ed25519.PublicKey), DID: did(k), Tree: "T", Nonce: fmt.Sprintf("%032x", i), Now: now, Expires: now.Add(time.Minute)}
	})
	if got["ok"] != 10 || got[ReasonBusy] != 30 {
		t.Fatalf("40 nonces of one tree bounded at 10 at once: %v", got)
	}
}

// Red team (rtnonce), held: window edges in memory. A signature exactly a
// window old is taken once and is stale (not taken again) one second
// later, when the sweep may have dropped its nonce; one exactly MaxAhead
// ahead is taken, and replayed while the clock walks to its end.
// (Was TestRedteamWindowEdgesNoReplay.)
func TestWindowEdgesNoReplay(t *testing.T) {
	clock := t0
	v := &Verifier{Now: func() time.Time { return clock }, MaxNoncesPerTree: 5}
	k := testKey(3)
	old := signed(t, k, t0.Add(-DefaultWindow), 1, "GET", "/", "")
	if err := v.VerifyInTree(old, nil, did(k), "T"); err != nil {
		t.Fatal(err)
	}
	ahead := signed(t, k, t0.Add(DefaultMaxAhead), 2, "GET", "/", "")
	if err := v.VerifyInTree(ahead, nil, did(k), "T"); err != nil {
		t.Fatal(err)
	}
	for s := 0; s <= int((DefaultWindow+DefaultMaxAhead)/time.Second)+2; s++ {
		clock = t0.Add(time.Duration(s) * time.Second)
		for _, r := range []*http.Request{old, ahead} {
			r2 := r.Clone(context.Background())
			if err := v.VerifyInTree(r2, nil, did(k), "U"); err == nil {
				t.Fatalf("at +%ds a signature was taken again", s)
			}
		}
	}
}
