package revocation

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redistest"
)

// waitLen waits up to 5 s for the Redis list to hold n entries.
func waitLen(t *testing.T, srv *redistest.Server, n int64) {
	t.Helper()
	c := srv.Client()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := c.HLen(context.Background(), redisHash).Result()
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the list holds %d entries (%v), want %d", got, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A copy writes back what Redis lost (FLUSHALL) and keeps enforcing it
// meanwhile; a copy opened on a durable copy alone, after Redis lost the
// list with no copy following it, restores it before Open returns.
func TestRedisListIsGrowOnly(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "revocations.json")
	r, err := OpenRedisCopy(srv.URL(), copyPath)
	if err != nil {
		t.Fatal(err)
	}
	k := testKey(t, 1)
	blocks, signers := []string{testID("token")}, []string{k.ID()}
	if err := Append(srv.URL(), testEntry(t, k, blocks[0], ScopeChain)); err != nil {
		t.Fatal(err)
	}
	waitRevoked(t, r, blocks, signers, time.Now())
	if l, err := Load(copyPath); err != nil || !l.IsRevoked(blocks[0]) {
		t.Fatalf("the durable copy: %v, %v", l, err)
	}
	if err := srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, revoked, err := r.Revoked(blocks, signers); err != nil || !revoked {
		t.Fatalf("after FLUSHALL: revoked %v, %v", revoked, err)
	}
	waitLen(t, srv, 1)
	if r.Restored() != 1 {
		t.Errorf("restored %d entries, want 1", r.Restored())
	}
	r.Close()

	if err := srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	r2, err := OpenRedisCopy(srv.URL(), copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if n, err := srv.Client().HLen(context.Background(), redisHash).Result(); err != nil || n != 1 {
		t.Fatalf("after a copy opened on the durable copy: %d entries (%v), want 1", n, err)
	}
	if _, revoked, err := r2.Revoked(blocks, signers); err != nil || !revoked {
		t.Fatalf("the reopened copy: revoked %v, %v", revoked, err)
	}
}

// A durable copy that cannot be written fails the list closed.
func TestRedisListCopyUnwritable(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "revocations.json")
	r, err := OpenRedisCopy(srv.URL(), copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The copy's directory goes: no entry can be written to it.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	k := testKey(t, 1)
	if err := Append(srv.URL(), testEntry(t, k, testID("token"), ScopeChain)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the list answers though its durable copy cannot be written")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := r.Revoked([]string{testID("other")}, []string{k.ID()}); err == nil {
		t.Fatal("Revoked answered though the durable copy cannot be written")
	}
}
