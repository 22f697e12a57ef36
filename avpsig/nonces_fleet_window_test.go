package avpsig

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redistest"
)

// Join records the first verifier's window as the fleet's; a shorter one
// joins and keeps each nonce for the fleet's window, a longer one is
// refused, and a key that holds no window refuses every verifier.
func TestRedisNoncesJoinFleetWindow(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	first, short, long := openNonces(t, rs.URL()), openNonces(t, rs.URL()), openNonces(t, rs.URL())
	if err := first.Join(ctx, 2*time.Minute); err != nil || first.Window != 2*time.Minute {
		t.Fatalf("the first to join: %v, window %s", err, first.Window)
	}
	if err := short.Join(ctx, 10*time.Second); err != nil || short.Window != 2*time.Minute {
		t.Fatalf("a shorter window: %v, window %s; want the fleet's, 2m", err, short.Window)
	}
	if err := long.Join(ctx, 3*time.Minute); err == nil || !strings.Contains(err.Error(), windowKey) {
		t.Fatalf("a longer window joined: %v", err)
	}

	// A spend at the short-window verifier lives for the fleet's window
	// (Redis keeps lives in whole milliseconds, rounded either way).
	holder := testKey(1)
	short.Skew = 0
	now := time.Now()
	signedAt := now.Truncate(time.Second)
	n := Nonce{Signer: holder.Public().(ed25519.PublicKey), DID: did(holder), Nonce: strings.Repeat("cd", 16), Now: now, Signed: signedAt, Expires: signedAt.Add(11 * time.Second)}
	if err := short.Spend(ctx, n); err != nil {
		t.Fatal(err)
	}
	ttl, err := rs.Client().PTTL(ctx, nonceKey(n.Signer, n.Nonce)).Result()
	if want := signedAt.Add(2*time.Minute + time.Second).Sub(now); err != nil || ttl < want-time.Second || ttl > want+time.Millisecond {
		t.Fatalf("the nonce lives %s (%v); want %s, the fleet's window", ttl, err, want)
	}

	rs.Client().Set(ctx, windowKey, "soon", 0)
	if err := openNonces(t, rs.URL()).Join(ctx, time.Second); err == nil {
		t.Fatal("joined a fleet whose window key holds no window")
	}
}

// A server whose clock runs behind takes a signature for longer than the
// key of its nonce lives: the key's life is counted on the clock of the
// server that spent it. Once it has expired, the same signed request sent
// to the lagging server is accepted a second time. (Skew is 0 here and
// the lag 2 s, so that the test waits 2 s; by default Skew is 5 s and a
// lag of more than 6 s does the same.)
// Found by the fourth red team (was TestRedteam4LaggingServerTakesReplayAfterKeyExpired).
func TestRedisNoncesLaggingServerRefusesReplay(t *testing.T) {
	rs := redistest.Start(t)
	store := func() *RedisNonces {
		s, err := OpenRedisNonces(rs.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.Skew = 0
		return s
	}
	holder := testKey(1)
	right := &Verifier{Window: time.Second, Store: store()}
	lagging := &Verifier{Window: time.Second, Store: store(), Now: func() time.Time { return time.Now().Add(-2 * time.Second) }}
	at := time.Now()
	if err := right.Verify(signed(t, holder, at, 5, "POST", "/mcp", "{}"), []byte("{}"), did(holder)); err != nil {
		t.Fatal(err)
	}
	key := nonceKey(holder.Public().(ed25519.PublicKey), strings.Repeat("05", 16))
	for {
		n, err := rs.Client().Exists(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := lagging.Verify(signed(t, holder, at, 5, "POST", "/mcp", "{}"), []byte("{}"), did(holder)); err == nil {
		t.Fatal("a server whose clock runs 2 s behind accepted a signed request another server had accepted")
	}
}
