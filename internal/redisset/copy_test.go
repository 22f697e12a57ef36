package redisset

import (
	"context"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

// A copy whose replies from Redis are delayed (not lost) must not answer
// from a copy older than StaleAfter: its pongs arrive steadily, but each
// tells only what Redis held when it sent it.
func TestCopyDelayedRepliesStale(t *testing.T) {
	srv := redistest.Start(t)
	const delay = 3 * time.Second
	relay, slow := redistest.DelayRelay(t, srv.Addr())
	c, err := redisconn.Open("redis://" + relay + "/0?read_timeout=10s&write_timeout=10s&dial_timeout=10s")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cp, err := Open(c, Options{What: "test set", Hash: "h", Channel: "ch", Check: func(string, string) error { return nil }}, 4*delay)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	slow.Store(int64(delay))
	time.Sleep(delay) // the delayed pongs flow steadily now
	direct := srv.Client()
	if _, err := Add(context.Background(), direct, "h", "ch", "revoked", "1", "test set"); err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	for time.Since(wrote) < delay {
		// Measured before the Get: one that began within StaleAfter may
		// return after it on a loaded machine, and may answer without
		// the entry (it was measured after, which a slow Get made fail).
		began := time.Since(wrote)
		_, ok, err := cp.Get("revoked")
		if err == nil && !ok && began > StaleAfter+200*time.Millisecond {
			t.Fatalf("the copy answered without the entry in a Get begun %v after it was written (StaleAfter %v)", began.Round(time.Millisecond), StaleAfter)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
