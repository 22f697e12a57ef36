package avpsig

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

func openNonces(t testing.TB, url string) *RedisNonces {
	t.Helper()
	s, err := OpenRedisNonces(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// The tests fix the verifiers' clocks.
	s.callerClock = true
	return s
}

// signedParts is a POST /mcp signed by key at a time with a nonce made of
// n, as VerifyParts takes it.
func signedParts(t testing.TB, key []byte, at time.Time, n uint64) string {
	t.Helper()
	var nb [16]byte
	binary.BigEndian.PutUint64(nb[8:], n)
	s, err := Sign(key, "POST", "/mcp", "", []byte("{}"), at, bytes.NewReader(nb[:]))
	if err != nil {
		t.Fatal(err)
	}
	return s.Signature
}

// A nonce spent in Redis is refused the second time, under a key that
// names the signer's did:key and the nonce and lives until the
// signature's timestamp leaves the window, plus the skew.
func TestRedisNoncesSpendOnce(t *testing.T) {
	rs := redistest.Start(t)
	holder := testKey(1)
	v := &Verifier{Now: func() time.Time { return t0.Add(300 * time.Millisecond) }, Store: openNonces(t, rs.URL())}
	if err := v.Verify(signed(t, holder, t0, 7, "POST", "/mcp", "{}"), []byte("{}"), did(holder)); err != nil {
		t.Fatal(err)
	}
	err := v.Verify(signed(t, holder, t0, 7, "POST", "/mcp", "{}"), []byte("{}"), did(holder))
	if reason(err) != ReasonReplayed {
		t.Fatalf("the same request again: %v", err)
	}
	if v.Nonces() != 0 {
		t.Fatalf("a Verifier with a Store holds %d nonces in memory", v.Nonces())
	}
	key := "delegateos:nonce:{" + did(holder) + "}:" + strings.Repeat("07", 16)
	tree := "delegateos:nonce-tree:{" + did(holder) + "}"
	ctx := context.Background()
	keys, err := rs.Client().Keys(ctx, "*").Result()
	slices.Sort(keys)
	if err != nil || !slices.Equal(keys, []string{tree, key}) {
		t.Fatalf("keys %q (%v), want only %q and %q", keys, err, tree, key)
	}
	ttl, err := rs.Client().PTTL(ctx, key).Result()
	// ts is t0, the clock t0+0.3 s: the window ends 60.7 s on, and the key
	// lives that plus the skew.
	if want := DefaultWindow + 700*time.Millisecond + DefaultClockSkew; err != nil || ttl <= want-30*time.Second || ttl > want {
		t.Fatalf("the key lives %v (%v), want at most %v", ttl, err, want)
	}
}

// A nonce whose own key was lost alone (evicted: a volatile policy drops
// the shortest-lived keys first; or deleted) is still refused while its
// member lives in its tree's set: two keys must go for a replay.
func TestRedisNoncesKeyLostAloneStillRefused(t *testing.T) {
	rs := redistest.Start(t)
	holder := testKey(1)
	v := &Verifier{Now: func() time.Time { return t0.Add(300 * time.Millisecond) }, Store: openNonces(t, rs.URL())}
	if err := v.Verify(signed(t, holder, t0, 7, "POST", "/mcp", "{}"), []byte("{}"), did(holder)); err != nil {
		t.Fatal(err)
	}
	key := "delegateos:nonce:{" + did(holder) + "}:" + strings.Repeat("07", 16)
	if n, err := rs.Client().Del(context.Background(), key).Result(); err != nil || n != 1 {
		t.Fatalf("DEL %s: %d, %v", key, n, err)
	}
	err := v.Verify(signed(t, holder, t0, 7, "POST", "/mcp", "{}"), []byte("{}"), did(holder))
	if reason(err) != ReasonReplayed {
		t.Fatalf("the same request again, its nonce's key gone: %v", err)
	}
}

// The key of a nonce expires once the window has passed: the nonce can be
// spent again (a signature with it would be stale by then).
func TestRedisNoncesExpire(t *testing.T) {
	rs := redistest.Start(t)
	s := openNonces(t, rs.URL())
	s.Skew = 0
	holder := testKey(1)
	now := time.Now()
	n := Nonce{Signer: holder.Public().(ed25519.PublicKey), DID: did(holder), Nonce: strings.Repeat("ab", 16), Now: now, Expires: now.Add(50 * time.Millisecond)}
	if err := s.Spend(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Spend(context.Background(), n)
		if err == nil {
			break
		}
		if reason(err) != ReasonReplayed {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the nonce is still spent 10 s after its window ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two verifiers (two servers) sharing one Redis accept each nonce once
// between them, whichever sees it first, and each still takes fresh ones.
func TestRedisNoncesTwoInstances(t *testing.T) {
	rs := redistest.Start(t)
	holder := testKey(1)
	clock := func() time.Time { return t0 }
	a := &Verifier{Now: clock, Store: openNonces(t, rs.URL())}
	b := &Verifier{Now: clock, Store: openNonces(t, rs.URL())}
	body := []byte("{}")
	for i, pair := range [][2]*Verifier{{a, b}, {b, a}} {
		first, second := pair[0], pair[1]
		req := func() *http.Request { return signed(t, holder, t0, byte(10+i), "POST", "/mcp", "{}") }
		if err := first.Verify(req(), body, did(holder)); err != nil {
			t.Fatalf("pair %d, first: %v", i, err)
		}
		if err := second.Verify(req(), body, did(holder)); reason(err) != ReasonReplayed {
			t.Fatalf("pair %d, the same request at the other verifier: %v", i, err)
		}
		if err := second.Verify(signed(t, holder, t0, byte(20+i), "POST", "/mcp", "{}"), body, did(holder)); err != nil {
			t.Fatalf("pair %d, a fresh request at the other verifier: %v", i, err)
		}
	}
}

// Only a verified signature spends a nonce: requests that fail any check
// before it (stale, wrong key, bad signature) write nothing to Redis, so
// no one can burn another's nonce or fill Redis with unsigned requests.
func TestRedisNoncesOnlyVerifiedSpend(t *testing.T) {
	rs := redistest.Start(t)
	holder, thief := testKey(1), testKey(2)
	v := &Verifier{Now: func() time.Time { return t0 }, Store: openNonces(t, rs.URL())}
	tampered := signed(t, holder, t0, 3, "POST", "/mcp", "{}")
	for name, try := range map[string]func() error{
		"bad signature": func() error { return v.Verify(tampered, []byte(`{"x":1}`), did(holder)) },
		"wrong key": func() error {
			return v.Verify(signed(t, thief, t0, 3, "POST", "/mcp", "{}"), []byte("{}"), did(holder))
		},
		"stale": func() error {
			return v.Verify(signed(t, holder, t0.Add(-time.Hour), 3, "POST", "/mcp", "{}"), []byte("{}"), did(holder))
		},
	} {
		if err := try(); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
	if n, err := rs.Client().DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Fatalf("refused requests left %d keys (%v)", n, err)
	}
	// The holder's nonce 3 is still good.
	if err := v.Verify(signed(t, holder, t0, 3, "POST", "/mcp", "{}"), []byte("{}"), did(holder)); err != nil {
		t.Fatal(err)
	}
}

// Redis down or stalled: a request is refused as signature_store_unavailable,
// matching redisconn.ErrUnavailable, and never accepted; once Redis is back,
// a nonce spent before is still refused and a fresh one is accepted.
func TestRedisNoncesUnavailable(t *testing.T) {
	rs := redistest.Start(t)
	holder := testKey(1)
	url := rs.URL() + "?read_timeout=300ms&write_timeout=300ms&dial_timeout=300ms"
	v := &Verifier{Now: func() time.Time { return t0 }, Store: openNonces(t, url)}
	body := []byte("{}")
	if err := v.VerifyParts("POST", "/mcp", "", []string{signedParts(t, holder, t0, 1)}, nil, body, did(holder)); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, n uint64) {
		t.Helper()
		err := v.VerifyParts("POST", "/mcp", "", []string{signedParts(t, holder, t0, n)}, nil, body, did(holder))
		if reason(err) != ReasonUnavailable || !errors.Is(err, redisconn.ErrUnavailable) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	rs.Pause()
	refused("Redis stalled", 2)
	rs.Resume()
	rs.Stop()
	refused("Redis stopped", 3)
	refused("Redis stopped, again", 3)
	rs.Restart()
	if err := v.VerifyParts("POST", "/mcp", "", []string{signedParts(t, holder, t0, 1)}, nil, body, did(holder)); reason(err) != ReasonReplayed {
		t.Fatalf("the nonce spent before Redis went down: %v", err)
	}
	if err := v.VerifyParts("POST", "/mcp", "", []string{signedParts(t, holder, t0, 4)}, nil, body, did(holder)); err != nil {
		t.Fatalf("a fresh nonce once Redis is back: %v", err)
	}
}

// Many goroutines on two stores spending one nonce at once: exactly one
// wins, every other is refused as replayed.
func TestRedisNoncesConcurrentSpend(t *testing.T) {
	rs := redistest.Start(t)
	holder := testKey(1)
	clock := func() time.Time { return t0 }
	vs := []*Verifier{{Now: clock, Store: openNonces(t, rs.URL())}, {Now: clock, Store: openNonces(t, rs.URL())}}
	body := []byte("{}")
	for round := range 20 {
		sig := signedParts(t, holder, t0, uint64(round))
		var mu sync.Mutex
		won := 0
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := vs[g%2].VerifyParts("POST", "/mcp", "", []string{sig}, nil, body, did(holder))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case reason(err) != ReasonReplayed:
					t.Errorf("round %d: %v", round, err)
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d of 16 spends of one nonce accepted", round, won)
		}
	}
}

// A Store that fails with an error of its own, not an *Error, refuses the
// request as unavailable.
func TestStoreErrorRefuses(t *testing.T) {
	holder := testKey(1)
	v := &Verifier{Now: func() time.Time { return t0 }, Store: failingStore{}}
	err := v.VerifyParts("POST", "/mcp", "", []string{signedParts(t, holder, t0, 1)}, nil, []byte("{}"), did(holder))
	if reason(err) != ReasonUnavailable || !errors.Is(err, errStoreBroken) {
		t.Fatalf("%v", err)
	}
}

var errStoreBroken = errors.New("broken")

type failingStore struct{}

func (failingStore) Spend(context.Context, Nonce) error { return errStoreBroken }

// BenchmarkVerifyStores is BenchmarkVerify with each nonce store: the
// Verifier's own memory, and Redis (one SET NX PX round trip to a local
// redis-server per request), with its append-only file synced every second
// (Redis's default) and at every write.
func BenchmarkVerifyStores(b *testing.B) {
	everysec, always := redistest.StartFsync(b, "everysec"), redistest.Start(b)
	holder := testKey(1)
	body := bytes.Repeat([]byte("x"), 512)
	want := did(holder)
	clock := func() time.Time { return t0 }
	for _, c := range []struct {
		name string
		v    *Verifier
	}{
		{"memory", &Verifier{Now: clock, MaxNonces: 1 << 30, MaxNoncesPerTree: 1 << 30}},
		{"redis", &Verifier{Now: clock, Store: openNonces(b, everysec.URL())}},
		{"redis-fsync-always", &Verifier{Now: clock, Store: openNonces(b, always.URL())}},
	} {
		// Nonces count on across the runs of -count and b.Loop's rounds:
		// a nonce is spent once.
		var next uint64
		b.Run(c.name, func(b *testing.B) {
			var nonce [16]byte
			binary.BigEndian.PutUint64(nonce[:], uint64(len(c.name))<<56)
			for b.Loop() {
				b.StopTimer()
				next++
				binary.BigEndian.PutUint64(nonce[8:], next)
				s, err := Sign(holder, "POST", "/mcp", "a=1", body, t0, bytes.NewReader(nonce[:]))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := c.v.VerifyParts("POST", "/mcp", "a=1", []string{s.Signature}, nil, body, want); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A Redis out of memory (noeviction) refuses the SET, and the request is
// refused with it, not accepted.
func TestRedisNoncesFullRedisRefuses(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	if err := rs.Client().ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rs.Client().ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	holder := testKey(1)
	v := &Verifier{Now: func() time.Time { return t0 }, Store: openNonces(t, rs.URL())}
	err := v.VerifyParts("POST", "/mcp", "", []string{signedParts(t, holder, t0, 1)}, nil, []byte("{}"), did(holder))
	if reason(err) != ReasonUnavailable || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("%v", err)
	}
}
