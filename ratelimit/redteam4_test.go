package ratelimit

import (
	"errors"
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
func TestRedteam4LenientLimitDoesNotFreeStrictOne(t *testing.T) {
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
