package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

// openRedis opens a Redis store on srv, closed when the test ends.
func openRedis(t testing.TB, srv *redistest.Server, limits map[string]Limit) *Redis {
	t.Helper()
	r, err := OpenRedis(srv.URL(), limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// stepped is a Redis store on srv that takes the time from Reserve's now,
// as the in-memory tests step it.
func stepped(t testing.TB, srv *redistest.Server, limits map[string]Limit) tested {
	r := openRedis(t, srv, limits)
	r.callerClock = true
	return tested{r, time.Microsecond, func(now time.Time) int64 { return now.UnixMicro() }}
}

// The in-memory limiter's properties hold in Redis, with time stepped by
// the test: no window over its limit, refusals exactly when a key is
// full with RetryAfter to the microsecond, all or nothing across keys,
// repeated keys, and releases.
func TestRedisProperties(t *testing.T) {
	// Durability is not what these test: the append-only file is not
	// synced at each write.
	srv := redistest.StartFsync(t, "no")
	t.Run("WindowNeverOverLimit", func(t *testing.T) {
		srv.Client().FlushAll(context.Background())
		checkWindowNeverOverLimit(t, 8, 1000, func(limits map[string]Limit) tested {
			srv.Client().FlushAll(context.Background())
			return stepped(t, srv, limits)
		})
	})
	t.Run("RetryAfterIsExact", func(t *testing.T) {
		srv.Client().FlushAll(context.Background())
		checkRetryAfterIsExact(t, stepped(t, srv, map[string]Limit{"p": {N: 2, Per: time.Minute}}))
	})
	t.Run("AllOrNothing", func(t *testing.T) {
		srv.Client().FlushAll(context.Background())
		checkAllOrNothing(t, stepped(t, srv, map[string]Limit{"p": {N: 2, Per: time.Minute}, "r": {N: 1, Per: time.Minute}}))
	})
	t.Run("RepeatedAndNoKeys", func(t *testing.T) {
		srv.Client().FlushAll(context.Background())
		checkRepeatedAndNoKeys(t, stepped(t, srv, map[string]Limit{"p": {N: 2, Per: time.Minute}}))
	})
	t.Run("Release", func(t *testing.T) {
		srv.Client().FlushAll(context.Background())
		checkRelease(t, stepped(t, srv, map[string]Limit{"p": {N: 1, Per: time.Minute}}))
	})
	t.Run("BurstAcrossBoundary", func(t *testing.T) {
		// N calls at the end of a fixed window and N at the start of the
		// next are N in all.
		srv.Client().FlushAll(context.Background())
		const n = 10
		per := time.Second
		l := stepped(t, srv, map[string]Limit{"p": {N: n, Per: per}})
		var ours []int64
		for i := range 2 * n {
			at := t0.Add(per - time.Millisecond + time.Duration(i)*(2*time.Millisecond/(2*n)))
			if a, err := l.Reserve([]Key{{"p", "d"}}, at); err == nil {
				ours = append(ours, a.at)
			}
		}
		for i := range n {
			at := t0.Add(per + time.Millisecond + time.Duration(i+1)*per/n)
			if a, err := l.Reserve([]Key{{"p", "d"}}, at); err == nil {
				ours = append(ours, a.at)
			}
		}
		if got := maxInWindow(ours, l.in(per)); got != n {
			t.Errorf("admitted at most %d in a window, want exactly %d", got, n)
		}
	})
}

// Three stores on one Redis, each its own connections as three proxies
// would have, with goroutines reserving (and some releasing) in
// parallel on the server's clock: no key ever admits more than N in any
// window, by the times the server gave the admissions.
func TestRedisFleetNeverOverLimit(t *testing.T) {
	srv := redistest.StartFsync(t, "no")
	limits := map[string]Limit{"p": {N: 20, Per: 50 * time.Millisecond}, "r": {N: 7, Per: 20 * time.Millisecond}}
	var stores []tested
	for range 3 {
		stores = append(stores, tested{openRedis(t, srv, limits), time.Microsecond, nil})
	}
	checkConcurrentReserve(t, limits, 500*time.Millisecond, stores...)
}

// Many calls at once from three stores at the same keys, with one slot
// left per window: exactly N are admitted, whichever store each came to.
func TestRedisLastSlotOnce(t *testing.T) {
	srv := redistest.StartFsync(t, "no")
	limits := map[string]Limit{"p": {N: 5, Per: time.Hour}}
	stores := []*Redis{openRedis(t, srv, limits), openRedis(t, srv, limits), openRedis(t, srv, limits)}
	keys := []Key{{"p", "root"}, {"p", "root/9:del_child"}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			_, err := stores[i%3].Reserve(keys, time.Now())
			switch {
			case err == nil:
				admitted.Add(1)
			case !errors.Is(err, ErrLimited):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 5 {
		t.Fatalf("%d calls admitted, want 5", got)
	}
}

// A call refused at one key takes no slot at the others, when the
// stores are different processes' (the script checks every key before it
// takes any).
func TestRedisAllOrNoneAcrossStores(t *testing.T) {
	srv := redistest.StartFsync(t, "no")
	limits := map[string]Limit{"p": {N: 3, Per: time.Hour}, "r": {N: 1, Per: time.Hour}}
	a, b := openRedis(t, srv, limits), openRedis(t, srv, limits)
	parent, child := Key{"p", "root"}, Key{"p", "root/9:del_child"}
	rule := Key{"r", "root/9:del_child"}
	if _, err := a.Reserve([]Key{parent, child, rule}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err := b.Reserve([]Key{parent, child, rule}, time.Now())
		var lim *LimitedError
		if !errors.As(err, &lim) || lim.Key != rule || lim.Limit != limits["r"] || lim.RetryAfter <= 0 || lim.RetryAfter > time.Hour {
			t.Fatalf("refused by the rule: %v; want limited at %v", err, rule)
		}
	}
	// The parent and the child have room for exactly two more.
	for i := range 3 {
		_, err := b.Reserve([]Key{parent, child}, time.Now())
		if (err == nil) != (i < 2) {
			t.Fatalf("call %d at the parent and child: %v", i, err)
		}
	}
}

// Release frees exactly its own slot at each of its keys: not another
// call's, not twice, and not from another store's admission at the same
// key.
func TestRedisReleaseExactSlot(t *testing.T) {
	srv := redistest.StartFsync(t, "no")
	limits := map[string]Limit{"p": {N: 2, Per: time.Hour}}
	a, b := openRedis(t, srv, limits), openRedis(t, srv, limits)
	k := []Key{{"p", "root"}}
	first, err := a.Reserve(k, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Reserve(k, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if second.at <= first.at {
		t.Fatalf("admission times %d then %d: not increasing", first.at, second.at)
	}
	log := func() []string {
		t.Helper()
		v, err := srv.Client().LRange(context.Background(), redisKey(k[0], limits["p"]), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := b.Release(first); err != nil { // another store may release it
		t.Fatal(err)
	}
	if got := log(); len(got) != 1 || got[0] != strconv.FormatInt(second.at, 10) {
		t.Fatalf("after releasing the first: %v, want only %d", got, second.at)
	}
	third, err := a.Reserve(k, time.Now())
	if err != nil {
		t.Fatalf("the released slot: %v", err)
	}
	if err := a.Release(first); err != nil {
		t.Fatal(err)
	}
	if got := log(); len(got) != 2 {
		t.Fatalf("a second release of the first took %v's place: %v", third.at, got)
	}
	if _, err := b.Reserve(k, time.Now()); !errors.Is(err, ErrLimited) {
		t.Fatalf("the window is full: %v", err)
	}
	if err := a.Release(Admission{}); err != nil {
		t.Fatal(err)
	}
}

// Redis stopped: every Reserve fails with an error matching
// redisconn.ErrUnavailable, within the client's timeouts, and never
// admits; a Release fails the same way.
func TestRedisStoppedRefuses(t *testing.T) {
	srv := redistest.Start(t)
	limits := map[string]Limit{"p": {N: 100, Per: time.Hour}}
	r := openRedis(t, srv, limits)
	k := []Key{{"p", "root"}}
	a, err := r.Reserve(k, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for range 3 {
		b, err := r.Reserve(k, time.Now())
		if !errors.Is(err, redisconn.ErrUnavailable) || errors.Is(err, ErrLimited) || b.at != 0 {
			t.Fatalf("with Redis stopped: %+v, %v; want an unavailable error", b, err)
		}
		if !strings.Contains(err.Error(), "rate-limit store "+srv.URL()) {
			t.Errorf("the error does not name the store: %v", err)
		}
	}
	if err := r.Release(a); !errors.Is(err, redisconn.ErrUnavailable) {
		t.Fatalf("a release with Redis stopped: %v", err)
	}
	if _, err := OpenRedis(srv.URL(), limits); !errors.Is(err, redisconn.ErrUnavailable) {
		t.Fatalf("opening with Redis stopped: %v", err)
	}
}

// Redis killed and started again from its append-only file (synced at
// every write) keeps the windows, and the stores reconnect by themselves.
func TestRedisRestartKeepsWindows(t *testing.T) {
	srv := redistest.Start(t)
	limits := map[string]Limit{"p": {N: 3, Per: time.Hour}}
	r := openRedis(t, srv, limits)
	k := []Key{{"p", "root"}, {"p", "root/9:del_child"}}
	for range 3 {
		if _, err := r.Reserve(k, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	srv.Restart()
	// The pool's first command after the restart may find its connection
	// gone; the client retries once, and the next dials afresh.
	var err error
	for range 3 {
		if _, err = r.Reserve(k[1:], time.Now()); !errors.Is(err, redisconn.ErrUnavailable) {
			break
		}
	}
	if !errors.Is(err, ErrLimited) {
		t.Fatalf("after a restart of Redis: %v; want limited", err)
	}
	ttl, err := srv.Client().PTTL(context.Background(), redisKey(k[0], limits["p"])).Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("the log expires in %s (%v); want within the hour of its newest time", ttl, err)
	}
}

// A log that holds something the scripts do not write refuses the call
// rather than admit it.
func TestRedisCorruptLog(t *testing.T) {
	srv := redistest.StartFsync(t, "no")
	limits := map[string]Limit{"p": {N: 2, Per: time.Hour}}
	r := openRedis(t, srv, limits)
	k := Key{"p", "root"}
	for _, bad := range []string{"1.5e15", "-3", "x", "012", "99999999999999999"} {
		srv.Client().Del(context.Background(), redisKey(k, limits["p"]))
		srv.Client().RPush(context.Background(), redisKey(k, limits["p"]), bad)
		if a, err := r.Reserve([]Key{k}, time.Now()); err == nil || errors.Is(err, ErrLimited) || a.at != 0 {
			t.Errorf("a log holding %q: %+v, %v; want an error", bad, a, err)
		}
	}
}

// Keys are unambiguous: a limit name and a level that split differently
// are different logs, and so are two rates of one name; every log of a
// tree carries its issuer's hash tag, the text Redis Cluster hashes (from
// the first "{" to the next "}").
func TestRedisKeys(t *testing.T) {
	lim := Limit{N: 2, Per: time.Minute}
	a, b := Key{"tools:a", "b:c/1:d"}, Key{"tools:a:b", "c/1:d"}
	if redisKey(a, lim) == redisKey(b, lim) {
		t.Fatalf("%v and %v share %s", a, b, redisKey(a, lim))
	}
	for _, other := range []Limit{{N: 3, Per: time.Minute}, {N: 2, Per: time.Hour}, {N: 2, Per: time.Minute + time.Microsecond}} {
		if redisKey(a, lim) == redisKey(a, other) {
			t.Errorf("rates %s and %s share %s", lim, other, redisKey(a, lim))
		}
	}
	for _, k := range []Key{a, b, {"policy", "ISS{x}/9:del_a"}} {
		got := redisKey(k, lim)
		_, rest, _ := strings.Cut(got, "{")
		tag, _, _ := strings.Cut(rest, "}")
		if !strings.HasPrefix(got, "delegateos:rate:{") || tag != redisconn.HashTag(k.Level) {
			t.Errorf("key %q of %v", got, k)
		}
	}
}

// A closed store refuses.
func TestRedisClosed(t *testing.T) {
	srv := redistest.StartFsync(t, "no")
	r := openRedis(t, srv, map[string]Limit{"p": {N: 2, Per: time.Hour}})
	r.Close()
	if _, err := r.Reserve([]Key{{"p", "root"}}, time.Now()); err == nil {
		t.Fatal("a closed store admitted a call")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

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
