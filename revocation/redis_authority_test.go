package revocation

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redistest"
)

// An entry planted in Redis, signed by a key that signed no block of the
// chain, verifies (it is a well-formed entry) but revokes nothing of a
// chain that key did not sign, and leaves the list answering.
func TestRedisPlantedNonAuthorityEntryRevokesNothing(t *testing.T) {
	srv := redistest.Start(t)
	r := openRedisList(t, srv.URL())
	authority, stranger := testKey(t, 1), testKey(t, 2)
	blocks := []string{testID("token")}
	e := testEntry(t, stranger, blocks[0], ScopeChain)
	v, _ := json.Marshal(e)
	c := srv.Client()
	ctx := context.Background()
	c.HSet(ctx, redisHash, redisField(e), string(v))
	c.Publish(ctx, redisChannel, redisField(e))
	waitRevoked(t, r, blocks, []string{stranger.ID()}, time.Now())
	if _, revoked, err := r.Revoked(blocks, []string{authority.ID()}); err != nil || revoked {
		t.Fatalf("a chain signed by another key: revoked %v, err %v", revoked, err)
	}
}
