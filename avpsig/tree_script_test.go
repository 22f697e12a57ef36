package avpsig

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redistest"
)

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
