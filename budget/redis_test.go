package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

// Three stores on one Redis are three proxies of a fleet: together they
// never pass any level's limit, and what they commit is exactly what each
// was told.
func TestRedisFleetNeverPassesALimit(t *testing.T) {
	srv := redistest.Start(t)
	const root, a, b = "ISSUER/del_root", "ISSUER/del_root/del_a", "ISSUER/del_root/del_b"
	stores := []*Redis{openRedis(t, srv.URL()), openRedis(t, srv.URL()), openRedis(t, srv.URL())}
	var mu sync.Mutex
	committed := map[string]int64{}
	var wg sync.WaitGroup
	for i := range 150 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[i%3]
			leaf := a
			if i%2 == 1 {
				leaf = b
			}
			levels := []Level{{root, 1000}, {leaf, 600}}
			r, err := s.Reserve(levels, 30)
			if isExceeded(err) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			actual := int64(10 + i%21) // 10..30
			if i%7 == 0 {
				if err := s.Release(r); err != nil {
					t.Error(err)
				}
				return
			}
			if err := s.Commit(r, actual); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			committed[root] += actual
			committed[leaf] += actual
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, k := range []string{root, a, b} {
		if got := stores[0].Spent(k); got != committed[k] {
			t.Errorf("Spent(%s) = %d, want the %d committed", k, got, committed[k])
		}
	}
	if committed[root] > 1000 || committed[a] > 600 || committed[b] > 600 {
		t.Errorf("a limit was passed: %v", committed)
	}
	if committed[root] == 0 {
		t.Error("no call was allowed")
	}
}

// A proxy that stops with a reservation open leaves its cost charged, as
// a File does: the next proxy counts it as spent.
func TestRedisOpenReservationStaysCharged(t *testing.T) {
	srv := redistest.Start(t)
	s := openRedis(t, srv.URL())
	mustReserve(t, s, []Level{{"ISSUER/del_root", 100}}, 70)
	s.Close() // the proxy is gone, the reservation not settled
	next := openRedis(t, srv.URL())
	if got := next.Spent("ISSUER/del_root"); got != 70 {
		t.Fatalf("Spent = %d, want the 70 held", got)
	}
	if _, err := next.Reserve([]Level{{"ISSUER/del_root", 100}}, 31); !isExceeded(err) {
		t.Fatalf("Reserve of 31 with 70 of 100 held: %v, want refused", err)
	}
	us, err := ReadUsage(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 || us[0].Reserved != 70 || us[0].Committed != 0 || us[0].Calls != 1 || us[0].Limit != 100 {
		t.Fatalf("ReadUsage = %+v, want 70 reserved over one call", us)
	}
}

// With appendonly yes and appendfsync always, a reservation Redis
// acknowledged survives a kill -9 of the server, and the commit after the
// restart settles it.
func TestRedisRestartBetweenReserveAndCommit(t *testing.T) {
	srv := redistest.Start(t)
	if srv.Config("appendonly") != "yes" || srv.Config("appendfsync") != "always" {
		t.Fatal("the test server does not run with appendonly yes and appendfsync always")
	}
	s := openRedis(t, srv.URL())
	levels := []Level{{"ISSUER/del_root", 100}, {"ISSUER/del_root/del_a", 50}}
	r := mustReserve(t, s, levels, 40)
	srv.Restart()
	// The first command after the restart may find the old connection
	// closed; the client retries once on a new one.
	var err error
	for range 20 {
		if err = s.Commit(r, 25); err == nil || !errors.Is(err, redisconn.ErrUnavailable) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil && !errors.Is(err, redisconn.ErrUnavailable) {
		t.Fatal(err)
	}
	// A failed Commit is retried in the background until it gets through.
	waitSpent(t, s, "ISSUER/del_root/del_a", 25)
	wantSpent(t, s, map[string]int64{"ISSUER/del_root": 25})
}

// A stalled server (SIGSTOP) refuses reservations with ErrUnavailable
// within the timeout, never allowing one; once it runs again the store
// carries on, and the reservations that got no reply are cancelled.
func TestRedisStallIsUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	s, err := OpenRedis(srv.URL() + "?read_timeout=300ms&write_timeout=300ms")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	levels := []Level{{"ISSUER/del_root", 1000}}
	r := mustReserve(t, s, levels, 10)
	if err := s.Commit(r, 10); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	for range 3 {
		_, err := s.Reserve(levels, 100)
		if !errors.Is(err, redisconn.ErrUnavailable) {
			srv.Resume()
			t.Fatalf("Reserve on a stalled server: %v, want ErrUnavailable", err)
		}
	}
	srv.Resume()
	var r2 *Reservation
	for range 50 {
		if r2, err = s.Reserve(levels, 5); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Reserve after the server resumed: %v", err)
	}
	if err := s.Commit(r2, 5); err != nil {
		t.Fatal(err)
	}
	// The three refused reservations, whether or not the server ran them
	// when it resumed, hold nothing once cancelled.
	waitSpent(t, s, "ISSUER/del_root", 15)
}

// A Reserve that reaches Redis after it was cancelled (its reply was
// lost, and the store gave up on it) holds nothing.
func TestRedisLateReserveAfterCancel(t *testing.T) {
	srv := redistest.Start(t)
	s := openRedis(t, srv.URL())
	keys := []string{"ISSUER/del_root"}
	rkeys := scriptKeys(keys, "late.1")
	ctx := context.Background()
	if err := commitScript.Run(ctx, s.c, rkeys, "late.1", 50, 0, "void", voidTTL.Milliseconds()).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := reserveScript.Run(ctx, s.c, append(rkeys, stampKey(keys[0])), "late.1", 50, 1, 1, 1, 1, 100, 100, 0, s.ident.ID, s.ident.Gen, 0, "1", s.nonce, 0, s.machine, 0, s.instance, "").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := parseReserveReply(res, 1); !errors.Is(err, errCancelled) {
		t.Fatalf("late reserve: %v, want it cancelled", err)
	}
	wantSpent(t, s, map[string]int64{"ISSUER/del_root": 0})
}

// Retried commands do not count twice: a Reserve run again with the same
// ID holds once, a Commit run again commits once.
func TestRedisScriptsAreIdempotent(t *testing.T) {
	srv := redistest.Start(t)
	s := openRedis(t, srv.URL())
	rkeys := scriptKeys([]string{"ISSUER/del_root"}, "x.1")
	ctx := context.Background()
	for range 2 {
		if err := reserveScript.Run(ctx, s.c, append(rkeys, stampKey("ISSUER/del_root")), "x.1", 40, 1, 1, 1, 1, 100, 100, 0, s.ident.ID, s.ident.Gen, 0, "1", s.nonce, 0, s.machine, 0, s.instance, "").Err(); err != nil {
			t.Fatal(err)
		}
	}
	wantSpent(t, s, map[string]int64{"ISSUER/del_root": 40})
	for range 2 {
		if err := commitScript.Run(ctx, s.c, rkeys, "x.1", 40, 30, "", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	wantSpent(t, s, map[string]int64{"ISSUER/del_root": 30})
}

// Spend and limits are exact up to the largest int64, past the 2^53 that
// Lua's numbers hold exactly.
func TestRedisExactPast2To53(t *testing.T) {
	s := openRedis(t, redistest.Start(t).URL())
	const k = "ISSUER/del_root"
	big := int64(1<<53 + 1)
	r := mustReserve(t, s, []Level{{k, math.MaxInt64}}, big)
	if err := s.Commit(r, big); err != nil {
		t.Fatal(err)
	}
	if got := s.Spent(k); got != big {
		t.Fatalf("Spent = %d, want %d", got, big)
	}
	_, err := s.Reserve([]Level{{k, 2 * big}}, big)
	if err != nil {
		t.Fatalf("a reservation that fits exactly: %v", err)
	}
	var ex *ExceededError
	if _, err := s.Reserve([]Level{{k, 2*big + 1}}, 2); !errors.As(err, &ex) || ex.Spent != 2*big {
		t.Fatalf("one over: %v, want refused with spent %d", err, 2*big)
	}
	// Commits past the largest int64 saturate there.
	for _, actual := range []int64{1, math.MaxInt64} {
		r = mustReserve(t, s, []Level{{"ISSUER/del_x", math.MaxInt64}}, 0)
		if err := s.Commit(r, actual); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Spent("ISSUER/del_x"); got != math.MaxInt64 {
		t.Fatalf("Spent = %d, want it saturated", got)
	}
	if _, err := s.Reserve([]Level{{"ISSUER/del_x", math.MaxInt64}}, 0); !isExceeded(err) {
		t.Fatalf("a key at the largest spend: %v, want refused", err)
	}
}

// The keys of one delegation tree share a Redis Cluster hash tag: its
// issuer.
func TestRedisKeysShareTheIssuersTag(t *testing.T) {
	for _, k := range []string{"ISSUER/1:a", "ISSUER/1:a/1:b"} {
		if got, want := spendKey(k), "delegateos:spend:{ISSUER}:"+k; got != want {
			t.Errorf("spendKey(%q) = %q, want %q", k, got, want)
		}
		if back, ok := budgetKeyOf(spendKey(k)); !ok || back != k {
			t.Errorf("budgetKeyOf(spendKey(%q)) = %q, %v", k, back, ok)
		}
	}
	if got := openKey("ISSUER/1:a"); got != "delegateos:open:{ISSUER}" {
		t.Errorf("openKey = %q", got)
	}
	if got := spendKey("a{b}/c"); got != "delegateos:spend:{ab}:a{b}/c" {
		t.Errorf("a brace in the issuer: %q", got)
	}
}

// Redis unreachable: OpenRedis fails with ErrUnavailable, naming the store.
func TestRedisUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	url := srv.URL()
	srv.Stop()
	_, err := OpenRedis(url)
	if !errors.Is(err, redisconn.ErrUnavailable) {
		t.Fatalf("OpenRedis of a stopped server: %v, want ErrUnavailable", err)
	}
	if want := fmt.Sprintf("spend store %s is unavailable", url); !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("message %q does not begin %q", err, want)
	}
	if _, err := ReadUsage(url); !errors.Is(err, redisconn.ErrUnavailable) {
		t.Fatalf("ReadUsage of a stopped server: %v, want ErrUnavailable", err)
	}
}

// waitSpent waits up to 10 s for key's spend to be want.
func waitSpent(t *testing.T, s Store, key string, want int64) {
	t.Helper()
	var got int64
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if got = s.Spent(key); got == want {
			return
		}
	}
	t.Fatalf("Spent(%s) = %d, want %d", key, got, want)
}

// A commit at the reserved cost is sent in the background: spend reads
// the same at once, and the reservation is settled (committed, not held)
// by the time Close returns.
func TestRedisCommitAtCostSettlesInTheBackground(t *testing.T) {
	srv := redistest.Start(t)
	s := openRedis(t, srv.URL())
	levels := []Level{{"ISSUER/del_root", 1000}, {"ISSUER/del_root/del_a", 500}}
	for range 20 {
		r := mustReserve(t, s, levels, 25)
		if err := s.Commit(r, 25); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(r, 25); err == nil {
			t.Fatal("a second commit of a reservation succeeded")
		}
	}
	wantSpent(t, s, map[string]int64{"ISSUER/del_root": 500, "ISSUER/del_root/del_a": 500})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	us, err := ReadUsage(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Committed != 500 || u.Reserved != 0 || u.Calls != 20 {
			t.Errorf("%s: %+v, want 500 committed over 20 calls", u.Key, u)
		}
	}
	if n := srv.Client().HLen(context.Background(), openKey("ISSUER/del_root")).Val(); n != 0 {
		t.Errorf("%d reservations still open", n)
	}
}

// Commits carried by a Reserve that is refused are made all the same.
func TestRedisRefusedReserveStillCarriesCommits(t *testing.T) {
	srv := redistest.Start(t)
	s := openRedis(t, srv.URL())
	levels := []Level{{"ISSUER/del_root", 50}}
	for range 2 {
		r := mustReserve(t, s, levels, 25)
		if err := s.Commit(r, 25); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Reserve(levels, 1); !isExceeded(err) {
		t.Fatalf("a reservation over the limit: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	us, err := ReadUsage(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 || us[0].Committed != 50 || us[0].Reserved != 0 {
		t.Fatalf("ReadUsage = %+v, want 50 committed", us)
	}
}

// Red team 4 (known limit of red team 3): the journal of the commits a
// proxy could not send was named by the URL as written, so a proxy naming
// the store another way (the default database left out) never sent it and
// the reservation stayed charged. Journals are now named by the store's
// canonical address. Redis is stopped (the release cannot reach it), the
// store closed (the release journalled), Redis restarted from its
// append-only file; a store opened on the same state directory with the
// URL spelled without its database releases it.
func TestRedisJournalFoundUnderAnotherSpelling(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	s1 := openRedisIn(t, srv.URL()+"?read_timeout=300ms&write_timeout=300ms&dial_timeout=300ms", dir)
	levels := []Level{{"ISSUER/del_root", 1000}}
	r := mustReserve(t, s1, levels, 100)
	srv.Stop()
	if err := s1.Release(r); err == nil {
		t.Fatal("a release with Redis stopped went through")
	}
	s1.Close()
	srv.Restart()
	s2 := openRedisIn(t, strings.TrimSuffix(srv.URL(), "/0"), dir)
	waitSpent(t, s2, "ISSUER/del_root", 0)
}
