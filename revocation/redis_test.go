package revocation

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redisset"
	"github.com/delegateos/delegateos/internal/redistest"
)

func openRedisList(t testing.TB, url string) *Redis {
	t.Helper()
	r, err := OpenRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// waitRevoked waits up to 30 s for r to report the block revoked, and
// returns how long it took.
func waitRevoked(t testing.TB, r *Redis, blocks, signers []string, from time.Time) time.Duration {
	t.Helper()
	for time.Since(from) < 30*time.Second {
		if _, revoked, err := r.Revoked(blocks, signers); err == nil && revoked {
			return time.Since(from)
		}
		time.Sleep(time.Millisecond)
	}
	_, _, err := r.Revoked(blocks, signers)
	t.Fatalf("the block was not revoked within 30s (err %v)", err)
	return 0
}

// An entry appended to a Redis list is in force at every proxy following
// it within a second: pushed, not polled.
func TestRedisRevocationReachesTheFleet(t *testing.T) {
	srv := redistest.Start(t)
	fleet := []*Redis{openRedisList(t, srv.URL()), openRedisList(t, srv.URL()), openRedisList(t, srv.URL())}
	k := testKey(t, 1)
	blocks, signers := []string{testID("token")}, []string{k.ID()}
	for _, r := range fleet {
		if _, revoked, err := r.Revoked(blocks, signers); err != nil || revoked {
			t.Fatalf("before the revoke: revoked %v, err %v", revoked, err)
		}
	}
	if err := Append(srv.URL(), testEntry(t, k, blocks[0], ScopeChain)); err != nil {
		t.Fatal(err)
	}
	appended := time.Now() // as delegateos revoke returns
	// What holds however loaded the machine: once redisset.StaleAfter (a
	// second) has passed since the append returned, no copy answers "not
	// revoked" (a copy that has not heard from Redis since fails closed).
	// How soon the push arrives is measured, not asserted: a bound on it
	// holds only on a machine with time to spare.
	t.Logf("the push reached proxy 0 %v after the append returned", waitRevoked(t, fleet[0], blocks, signers, appended))
	time.Sleep(time.Until(appended.Add(redisset.StaleAfter + time.Millisecond)))
	for i, r := range fleet {
		if _, revoked, err := r.Revoked(blocks, signers); err == nil && !revoked {
			t.Errorf("proxy %d answered \"not revoked\" %v after the append returned", i, time.Since(appended))
		}
	}
	for _, r := range fleet {
		waitRevoked(t, r, blocks, signers, appended)
	}
	// Appending it again adds nothing.
	if err := Append(srv.URL(), testEntry(t, k, blocks[0], ScopeBlock)); err != nil {
		t.Fatal(err)
	}
	l, err := Load(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 1 {
		t.Fatalf("Load: %d entries, want 1", l.Len())
	}
}

// A proxy whose subscription broke, and so missed an entry's message,
// reads the entry when it subscribes again, before it answers "not
// revoked" again.
func TestRedisRevocationCatchesUpAfterReconnect(t *testing.T) {
	srv := redistest.Start(t)
	r := openRedisList(t, srv.URL())
	k := testKey(t, 1)
	blocks, signers := []string{testID("token")}, []string{k.ID()}
	e := testEntry(t, k, blocks[0], ScopeChain)
	value, _ := json.Marshal(e)
	ctx := context.Background()
	c := srv.Client()
	// The entry is written without its message: a message the proxy
	// missed. Then the proxy's subscription is cut.
	if err := c.HSet(ctx, redisHash, redisField(e), string(value)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, revoked, err := r.Revoked(blocks, signers)
		if revoked {
			break
		}
		if err != nil && !errors.Is(err, redisconn.ErrUnavailable) {
			t.Fatalf("err %v, want ErrUnavailable while reconnecting", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not read the entry within 10s of reconnecting (err %v)", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// After a restart of the server (from its append-only file) the list is
// still there, and a proxy reconnects to it by itself.
func TestRedisRevocationSurvivesRestart(t *testing.T) {
	srv := redistest.Start(t)
	r := openRedisList(t, srv.URL())
	k := testKey(t, 1)
	blocks, signers := []string{testID("token")}, []string{k.ID()}
	if err := Append(srv.URL(), testEntry(t, k, blocks[0], ScopeChain)); err != nil {
		t.Fatal(err)
	}
	waitRevoked(t, r, blocks, signers, time.Now())
	srv.Restart()
	other := []string{testID("other")}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, revoked, err := r.Revoked(other, signers)
		if err == nil && !revoked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after the restart: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, revoked, err := r.Revoked(blocks, signers); err != nil || !revoked {
		t.Fatalf("after the restart: revoked %v, err %v", revoked, err)
	}
}

// A stalled server makes the list unavailable within about a second, so
// that no decision is made on a copy that may be stale; it recovers when
// the server runs again.
func TestRedisRevocationStall(t *testing.T) {
	srv := redistest.Start(t)
	r := openRedisList(t, srv.URL())
	k := testKey(t, 1)
	blocks, signers := []string{testID("token")}, []string{k.ID()}
	srv.Pause()
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if _, _, err = r.Revoked(blocks, signers); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Resume()
	if !errors.Is(err, redisconn.ErrUnavailable) {
		t.Fatalf("a stalled server: err %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "revocation list "+srv.URL()) {
		t.Errorf("the message does not name the list: %v", err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		if _, _, err = r.Revoked(blocks, signers); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after the server resumed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// What Redis holds is verified, not trusted: an entry with a bad
// signature, or under another field, makes the list fail closed.
func TestRedisRevocationVerifiesWhatItReads(t *testing.T) {
	k := testKey(t, 1)
	e := testEntry(t, k, testID("token"), ScopeChain)
	forged := e
	forged.RevocationID = testID("other")
	good, _ := json.Marshal(e)
	bad, _ := json.Marshal(forged)
	for name, set := range map[string][2]string{
		"bad signature": {redisField(forged), string(bad)},
		"other field":   {redisField(e) + "x", string(good)},
		"not JSON":      {redisField(e), "{"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t)
			if err := srv.Client().HSet(context.Background(), redisHash, set[0], set[1]).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenRedis(srv.URL()); err == nil {
				t.Fatal("OpenRedis accepted a list holding a forged entry")
			}
			if _, err := Load(srv.URL()); err == nil {
				t.Fatal("Load accepted a list holding a forged entry")
			}
		})
	}
	// Added while a proxy follows the list: the proxy stops answering.
	srv := redistest.Start(t)
	r := openRedisList(t, srv.URL())
	c := srv.Client()
	c.HSet(context.Background(), redisHash, redisField(forged), string(bad))
	c.Publish(context.Background(), redisChannel, redisField(forged))
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, err := r.Revoked([]string{testID("x")}, []string{k.ID()})
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a forged entry pushed to a proxy left it answering")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkRedisRevokeFleet measures how long an Append to a Redis list
// takes to be enforced at three followers (the slowest of them): the
// fleet-wide revocation latency.
func BenchmarkRedisRevokeFleet(b *testing.B) {
	srv := redistest.Start(b)
	fleet := []*Redis{openRedisList(b, srv.URL()), openRedisList(b, srv.URL()), openRedisList(b, srv.URL())}
	k := testKey(b, 1)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		id := testID("token" + string(rune('a'+i%26)) + time.Now().String())
		blocks, signers := []string{id}, []string{k.ID()}
		e := testEntry(b, k, id, ScopeChain)
		start := time.Now()
		if err := Append(srv.URL(), e); err != nil {
			b.Fatal(err)
		}
		var worst time.Duration
		for _, r := range fleet {
			worst = max(worst, waitRevoked(b, r, blocks, signers, start))
		}
		lat = append(lat, worst)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

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
