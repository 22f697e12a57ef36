package redisconn_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

// The eviction watch: a policy that may evict fails Err (and is lifted
// when set back); keys evicted between two polls are reported once; a
// user without INFO or CONFIG is reported unverifiable at start.
func TestEvictionWatch(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	c := rs.Client()
	e, err := redisconn.WatchEviction(ctx, c, "the test store")
	if err != nil {
		t.Fatal(err)
	}
	if e.Err() != nil || e.Unverifiable() != "" {
		t.Fatalf("a noeviction server: %v, %q", e.Err(), e.Unverifiable())
	}
	if err := c.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	if why, err := e.Poll(ctx); err != nil || why != "" {
		t.Fatalf("a policy change alone: %q, %v", why, err)
	}
	if err := e.Err(); !errors.Is(err, redisconn.ErrEviction) || !errors.Is(err, redisconn.ErrUnavailable) || !strings.Contains(err.Error(), "allkeys-lru") {
		t.Fatalf("under allkeys-lru, Err: %v", err)
	}
	// Fill past maxmemory: Redis evicts.
	info, _ := c.Info(ctx, "memory").Result()
	var mem int64
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			mem, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(mem+256<<10, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("x", 4096)
	for i := range 512 {
		if err := c.Set(ctx, "k"+strconv.Itoa(i), filler, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	why, err := e.Poll(ctx)
	if err != nil || !strings.Contains(why, "evicted") {
		t.Fatalf("after evictions: %q, %v", why, err)
	}
	if why, err := e.Poll(ctx); err != nil || why != "" {
		t.Fatalf("a second poll with no more evictions: %q, %v", why, err)
	}
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Poll(ctx); err != nil || e.Err() != nil {
		t.Fatalf("policy set back: %v, %v", err, e.Err())
	}

	// A user that may run neither INFO nor CONFIG.
	if err := c.Do(ctx, "ACL", "SETUSER", "gate", "on", ">pw", "~*", "&*", "+@all", "-config", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	uc := redis.NewClient(&redis.Options{Addr: rs.Addr(), Username: "gate", Password: "pw"})
	defer uc.Close()
	ue, err := redisconn.WatchEviction(ctx, uc, "the test store")
	if err != nil {
		t.Fatal(err)
	}
	if w := ue.Unverifiable(); !strings.Contains(w, "INFO and CONFIG are refused") {
		t.Fatalf("a user without INFO and CONFIG: %q", w)
	}
}

// On a cluster every primary is watched: a policy changed on the primary
// of one key's shard fails Err.
func TestEvictionWatchCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c, err := redisconn.Open(cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	e, err := redisconn.WatchEviction(ctx, c, "the test store")
	if err != nil || e.Err() != nil {
		t.Fatalf("a noeviction cluster: %v, %v", err, e.Err())
	}
	primary, _ := cl.PrimaryFor("delegateos:store")
	if err := primary.Client().ConfigSet(ctx, "maxmemory-policy", "volatile-ttl").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Err(); !errors.Is(err, redisconn.ErrEviction) || !strings.Contains(err.Error(), "volatile-ttl") {
		t.Fatalf("one primary under volatile-ttl, Err: %v", err)
	}
}
