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

	// A spend at the short-window verifier lives for the fleet's window.
	holder := testKey(1)
	short.Skew = 0
	now := time.Now()
	signedAt := now.Truncate(time.Second)
	n := Nonce{Signer: holder.Public().(ed25519.PublicKey), DID: did(holder), Nonce: strings.Repeat("cd", 16), Now: now, Signed: signedAt, Expires: signedAt.Add(11 * time.Second)}
	if err := short.Spend(ctx, n); err != nil {
		t.Fatal(err)
	}
	ttl, err := rs.Client().PTTL(ctx, nonceKey(n.Signer, n.Nonce)).Result()
	if want := signedAt.Add(2*time.Minute + time.Second).Sub(now); err != nil || ttl < want-time.Second || ttl > want {
		t.Fatalf("the nonce lives %s (%v); want %s, the fleet's window", ttl, err, want)
	}

	rs.Client().Set(ctx, windowKey, "soon", 0)
	if err := openNonces(t, rs.URL()).Join(ctx, time.Second); err == nil {
		t.Fatal("joined a fleet whose window key holds no window")
	}
}
