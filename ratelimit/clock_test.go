package ratelimit

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// A Limiter's clock is its start's wall time plus the monotonic time
// since, so that a step of the wall clock neither frees nor blocks calls
// in the process; but the times it appends to the file are on that clock,
// and the next process reads them against the wall clock. Go's monotonic
// clock on Linux (CLOCK_MONOTONIC) stops while the machine is suspended,
// and does not follow a correction of the wall clock: after a laptop
// sleeps for an hour, or NTP moves a slow clock forward by an hour, every
// admission the proxy writes is an hour older than it is. An MCP client
// starts a proxy per session, and the next proxy finds those windows
// empty: N calls, a restart, and N more within the same minute.
//
// The hour is simulated by moving the Limiter's anchor back, which is
// exactly where a suspend leaves it (wall − monotonic grows by the time
// asleep).
// Found by the third red team (was TestRedteam3ClockBehindWallFreesWindowsAtRestart).
func TestFileClockBehindWallKeepsWindowsAtRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rates")
	limits := map[string]Limit{"p": {N: 2, Per: time.Minute}}
	k := Key{"p", "root/9:del_a"}
	l := openFile(t, path, limits, time.Now())
	// The machine slept for an hour after the proxy started.
	l.baseNano -= int64(time.Hour)
	reserve(t, l, time.Now(), k)
	reserve(t, l, time.Now(), k)
	if _, err := l.Reserve([]Key{k}, time.Now()); !errors.Is(err, ErrLimited) {
		t.Fatalf("a third call in the same minute: %v; want limited", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The client starts the proxy again at once.
	l2 := openFile(t, path, limits, time.Now())
	defer l2.Close()
	if _, err := l2.Reserve([]Key{k}, time.Now()); !errors.Is(err, ErrLimited) {
		t.Errorf("after a restart, a third call within a minute of two others was admitted (%v): the file dated them an hour back", err)
	}
}
