package budget

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/redistest"
)

// A Redis shared with other programs holds many keys besides the spend
// store's: Migrate must still see that the target holds spend, and refuse,
// rather than write the file's spend over it.
func TestMigrateRefusesTargetWithSpendAmongOtherKeys(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := srv.Client()
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 20000 {
			p.Set(ctx, fmt.Sprintf("otherapp:%d", i), "x", 0)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	levels := []Level{{"ISSUER/1:a", 1000}}
	r := openRedis(t, srv.URL())
	res := mustReserve(t, r, levels, 900)
	if err := r.Commit(res, 900); err != nil {
		t.Fatal(err)
	}
	r.Close()

	src := filepath.Join(tempDir(t), "spend.log")
	f, err := OpenFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(mustReserve(t, f, levels, 10), 10); err != nil {
		t.Fatal(err)
	}
	f.Close()

	if _, err := Migrate(src, srv.URL()); err == nil {
		t.Error("Migrate into a store that holds spend succeeded")
	}
	wantSpent(t, openRedis(t, srv.URL()), map[string]int64{"ISSUER/1:a": 900})
}

// A value in a spend hash that the scripts never write (planted, or
// corrupted) must refuse the reservation, never read as a small spend.
func TestRedisReserveRefusesGarbageSpend(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := srv.Client()
	levels := []Level{{"ISSUER/1:a", 1000}, {"ISSUER/1:a/1:b", 1000}}
	r := openRedis(t, srv.URL())
	for _, field := range []string{"c", "h"} {
		for _, v := range []string{"", "-1", "-999", "abc", "1e2", " 5", "5 ", "0x10", "007", "5.5", "+5", "9\x00"} {
			for _, l := range levels {
				c.Del(ctx, spendKey(l.Key))
			}
			if err := c.HSet(ctx, spendKey(levels[1].Key), field, v).Err(); err != nil {
				t.Fatal(err)
			}
			res, err := r.Reserve(levels, 1)
			if err == nil {
				t.Errorf("%s = %q: Reserve succeeded", field, v)
				r.Release(res)
			}
		}
	}
}

// A commit that meets garbage in one of its keys must not half-run (Redis
// keeps the writes a failing script made): once the key is repaired the
// commit's retry still charges the actual cost.
func TestRedisCommitGarbageDoesNotLoseSpend(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := srv.Client()
	levels := []Level{{"ISSUER/1:a", 1000}, {"ISSUER/1:a/1:b", 1000}}
	r := openRedis(t, srv.URL())
	res := mustReserve(t, r, levels, 100)
	if err := c.HSet(ctx, spendKey(levels[1].Key), "c", "junk").Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(res, 60); err == nil {
		t.Fatal("Commit over garbage succeeded")
	}
	if err := c.HSet(ctx, spendKey(levels[1].Key), "c", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil { // waits for the retry
		t.Fatal(err)
	}
	wantSpent(t, openRedis(t, srv.URL()), map[string]int64{"ISSUER/1:a": 60, "ISSUER/1:a/1:b": 60})
}

// A Reserve whose reply is late past the timeout (the script ran, its
// answer did not arrive) refuses the call, and the cost it held is given
// back: the refused call is never charged, and nothing is held twice by
// the client's own retry of the command.
func TestRedisReserveLostReplyNotCharged(t *testing.T) {
	srv := redistest.Start(t)
	relay, slow := redistest.DelayRelay(t, srv.Addr())
	r := openRedis(t, "redis://"+relay+"/0")
	levels := []Level{{"ISSUER/1:a", 1000}, {"ISSUER/1:a/1:b", 1000}}
	mustReserve(t, r, levels, 1) // connected; the scripts loaded
	slow.Store(int64(1500 * time.Millisecond))
	if res, err := r.Reserve(levels, 300); err == nil {
		t.Fatalf("Reserve without a reply in time succeeded: %v", res)
	}
	slow.Store(0)
	direct := openRedis(t, srv.URL())
	deadline := time.Now().Add(20 * time.Second)
	for direct.Spent("ISSUER/1:a/1:b") != 1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	wantSpent(t, direct, map[string]int64{"ISSUER/1:a": 1, "ISSUER/1:a/1:b": 1})
	// and it stays so: no late copy of the command holds it again.
	time.Sleep(2 * time.Second)
	wantSpent(t, direct, map[string]int64{"ISSUER/1:a": 1, "ISSUER/1:a/1:b": 1})
}

// Keys that differ only in braces, colons or "}:" (which the hash tag and
// the key layout use) never share spend, and read back as themselves.
func TestRedisKeysWithTagCharactersStayApart(t *testing.T) {
	srv := redistest.Start(t)
	r := openRedis(t, srv.URL())
	keys := []string{"ab/1:x", "a{b}/1:x", "{ab}/1:x", "a}:b/1:x", "ab/1:x}:", "ab}:/1:x", "ab/1:{x}"}
	for i, k := range keys {
		res := mustReserve(t, r, []Level{{k, 1000}}, int64(i+1))
		if err := r.Commit(res, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	want := map[string]int64{}
	for i, k := range keys {
		want[k] = int64(i + 1)
	}
	wantSpent(t, openRedis(t, srv.URL()), want)
	us, err := ReadUsage(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != len(keys) {
		t.Fatalf("ReadUsage: %d keys, want %d: %+v", len(us), len(keys), us)
	}
	for _, u := range us {
		if u.Committed != want[u.Key] {
			t.Errorf("ReadUsage: %q committed %d, want %d", u.Key, u.Committed, want[u.Key])
		}
	}
}

// A Reserve refused by garbage in a key leaves nothing to retry: its
// cancelling succeeds at once rather than failing on the same garbage in
// the background for minutes, one goroutine per refused call.
func TestRedisReserveGarbageCancelsAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	levels := []Level{{"ISSUER/1:a", 1000}}
	if err := srv.Client().HSet(ctx, spendKey(levels[0].Key), "c", "junk").Err(); err != nil {
		t.Fatal(err)
	}
	r := openRedis(t, srv.URL())
	for range 20 {
		if _, err := r.Reserve(levels, 1); err == nil {
			t.Fatal("Reserve over garbage succeeded")
		}
	}
	done := make(chan struct{})
	go func() { r.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelling of refused reservations is still being retried")
	}
}
