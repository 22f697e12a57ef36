package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redistest"
)

// Proxies that share a Redis need not run one policy: a fleet in the
// middle of a policy roll-out, or two teams' proxies on one Redis with
// tokens of one issuer, name the same limit ("tools:write_*") with
// different rates. A proxy whose limit is lenient must not free the
// windows of a proxy whose limit is strict: its script trims the log to
// its own N and sets the log's life to its own window, so a holder who
// calls once through the lenient proxy may call the strict one again at
// once, and the strict limit admits more than its N in its window.
// Found by the fourth red team (was TestRedteam4LenientLimitDoesNotFreeStrictOne).
func TestRedisLenientLimitDoesNotFreeStrictOne(t *testing.T) {
	srv := redistest.StartFsync(t, "no")
	strict := stepped(t, srv, map[string]Limit{"tools:write_*": {N: 2, Per: time.Hour}})
	lenient := stepped(t, srv, map[string]Limit{"tools:write_*": {N: 1, Per: time.Millisecond}})
	k := Key{"tools:write_*", "root/9:del_a"}
	for i := range 2 {
		if _, err := strict.Reserve([]Key{k}, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := strict.Reserve([]Key{k}, t0.Add(2*time.Second)); !errors.Is(err, ErrLimited) {
		t.Fatalf("a third call within the hour: %v; want limited", err)
	}
	if _, err := lenient.Reserve([]Key{k}, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Reserve([]Key{k}, t0.Add(4*time.Second)); !errors.Is(err, ErrLimited) {
		t.Errorf("the strict limit of 2/1h admitted a third call within the hour after a call through a proxy whose limit is 1/1ms (%v)", err)
	}
}

// A Reserve Redis does not answer in time is refused, and may have taken
// its slots all the same: the limits only get stricter. But the client
// retries a command whose reply timed out (MaxRetries 1), on another
// connection of its pool, and Redis runs the script again once it
// answers: a refused call takes its slots twice, so a client whose calls
// are refused while Redis stalls (a fork for a save, a slow command)
// finds its windows full of calls that never ran twice as fast. A proxy
// in use has connections in its pool; the test makes some.
// Found by the fourth red team (was TestRedteam4StalledReserveTakesOneSlot).
func TestRedisStalledReserveTakesOneSlot(t *testing.T) {
	srv := redistest.StartFsync(t, "no")
	limits := map[string]Limit{"p": {N: 10, Per: time.Hour}, "q": {N: 100, Per: time.Hour}}
	r := openRedis(t, srv, limits)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := r.Reserve([]Key{{"q", "other"}}, time.Now()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	k := []Key{{"p", "root"}}
	if _, err := r.Reserve(k, time.Now()); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	_, err := r.Reserve(k, time.Now())
	srv.Resume()
	if err == nil {
		t.Fatal("a Reserve Redis did not answer was admitted")
	}
	// Every command sent before this one has run once Redis answers it.
	if _, err := r.Reserve(k, time.Now()); err != nil {
		t.Fatal(err)
	}
	n, err := srv.Client().LLen(context.Background(), redisKey(k[0], limits["p"])).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n > 3 {
		t.Errorf("two admitted calls and one refused while Redis stalled hold %d slots; want at most 3", n)
	}
}
