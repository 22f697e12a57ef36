package ratelimit

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// t0 is the tests' clock at its start: a time without a monotonic
// reading, as a test's clock is.
var t0 = time.Unix(1_700_000_000, 0)

func newLimiter(t testing.TB, limits map[string]Limit) *Limiter {
	t.Helper()
	l, err := New(limits)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// maxInWindow is the most times of ts, ascending, that one window of
// length per holds: any N+1 consecutive times must span per or more.
func maxInWindow(ts []int64, per int64) int {
	most, lo := 0, 0
	for hi := range ts {
		for ts[hi]-ts[lo] >= per {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

// inWindow counts the times of ts in (at-per, at].
func inWindow(ts []int64, at int64, per int64) int {
	n := 0
	for _, x := range ts {
		if x > at-per && x <= at {
			n++
		}
	}
	return n
}

// tested is a Store under test, and how it reads times: the unit of its
// admission times, and the time it gives a call at now.
type tested struct {
	Store
	unit time.Duration
	at   func(now time.Time) int64
}

func memoryTested(l *Limiter) tested { return tested{l, time.Nanosecond, l.nanos} }

// in is d in the store's unit.
func (s tested) in(d time.Duration) int64 { return int64(d / s.unit) }

// Calls at random moments, at random keys of two limits and three levels:
// every key's admissions fit its limit in every window; a call is refused
// only when a key it needs already holds N admissions in the window that
// ends at it; and RetryAfter is exactly when the oldest of them leaves.
func TestWindowNeverOverLimit(t *testing.T) {
	checkWindowNeverOverLimit(t, 20, 2000, func(limits map[string]Limit) tested { return memoryTested(newLimiter(t, limits)) })
}

func checkWindowNeverOverLimit(t *testing.T, seeds uint64, calls int, open func(map[string]Limit) tested) {
	limits := map[string]Limit{"a": {N: 3, Per: time.Second}, "b": {N: 5, Per: 2500 * time.Millisecond}}
	levels := []string{"r", "r/x", "r/y"}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 1))
		l := open(limits)
		admitted := map[Key][]int64{}
		now := t0
		for range calls {
			now = now.Add(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
			leaf := levels[1+rng.IntN(2)]
			var keys []Key
			for name := range limits {
				if rng.IntN(3) > 0 {
					keys = append(keys, Key{name, "r"}, Key{name, leaf})
				}
			}
			a, err := l.Reserve(keys, now)
			at := l.at(now)
			var lim *LimitedError
			switch {
			case err == nil:
				if len(keys) > 0 && a.at < at {
					t.Fatalf("admitted at %d, before the call at %d", a.at, at)
				}
				for _, k := range keys {
					admitted[k] = append(admitted[k], a.at)
				}
			case errors.As(err, &lim):
				per := l.in(limits[lim.Key.Limit].Per)
				ts := admitted[lim.Key]
				if got := inWindow(ts, at, per); got < lim.Limit.N {
					t.Fatalf("seed %d: refused at %s with %d admissions in the window, limit %d", seed, lim.Key, got, lim.Limit.N)
				}
				oldest := ts[len(ts)-lim.Limit.N]
				if want := time.Duration(oldest+per-at) * l.unit; lim.RetryAfter != want {
					t.Fatalf("seed %d: retry after %s, want %s", seed, lim.RetryAfter, want)
				}
				// No key needs a longer wait than the one named.
				for _, k := range keys {
					if ts := admitted[k]; len(ts) >= limits[k.Limit].N {
						if w := time.Duration(ts[len(ts)-limits[k.Limit].N]+l.in(limits[k.Limit].Per)-at) * l.unit; w > lim.RetryAfter {
							t.Fatalf("seed %d: %s waits %s, longer than the %s named", seed, k, w, lim.RetryAfter)
						}
					}
				}
			default:
				t.Fatal(err)
			}
		}
		for k, ts := range admitted {
			if got := maxInWindow(ts, l.in(limits[k.Limit].Per)); got > limits[k.Limit].N {
				t.Fatalf("seed %d: %s admitted %d in one window, limit %d", seed, k, got, limits[k.Limit].N)
			}
		}
	}
}

// A call waiting RetryAfter is admitted then, and not a nanosecond (a
// unit of the store's times) before.
func TestRetryAfterIsExact(t *testing.T) {
	checkRetryAfterIsExact(t, memoryTested(newLimiter(t, map[string]Limit{"p": {N: 2, Per: time.Minute}})))
}

func checkRetryAfterIsExact(t *testing.T, l tested) {
	k := []Key{{"p", "d"}}
	for _, at := range []time.Duration{0, 10 * time.Second} {
		if _, err := l.Reserve(k, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(30 * time.Second)
	_, err := l.Reserve(k, now)
	var lim *LimitedError
	if !errors.As(err, &lim) || !errors.Is(err, ErrLimited) || lim.RetryAfter != 30*time.Second {
		t.Fatalf("third call: %v; want limited, retry after 30s", err)
	}
	if _, err := l.Reserve(k, now.Add(lim.RetryAfter-l.unit)); !errors.Is(err, ErrLimited) {
		t.Fatalf("a unit early: %v", err)
	}
	if _, err := l.Reserve(k, now.Add(lim.RetryAfter)); err != nil {
		t.Fatalf("after RetryAfter: %v", err)
	}
}

// N calls at the end of a fixed window and N at the start of the next, the
// pattern a counter reset every period lets through, are N in all. A GCRA
// with a burst of N, which the same N per period could mean, lets 2N-1
// through within one period.
func TestBurstAcrossBoundary(t *testing.T) {
	const n = 10
	per := time.Second
	l := newLimiter(t, map[string]Limit{"p": {N: n, Per: per}})
	g := gcra{interval: per / n, burst: n}
	var ours, theirs []int64
	for i := range 2 * n {
		at := t0.Add(per - time.Millisecond + time.Duration(i)*(2*time.Millisecond/(2*n)))
		if a, err := l.Reserve([]Key{{"p", "d"}}, at); err == nil {
			ours = append(ours, a.at)
		}
		if g.admit(at) {
			theirs = append(theirs, at.UnixNano())
		}
	}
	// Then a call every interval for a period.
	for i := range n {
		at := t0.Add(per + time.Millisecond + time.Duration(i+1)*per/n)
		if g.admit(at) {
			theirs = append(theirs, at.UnixNano())
		}
		if a, err := l.Reserve([]Key{{"p", "d"}}, at); err == nil {
			ours = append(ours, a.at)
		}
	}
	if got := maxInWindow(ours, int64(per)); got != n {
		t.Errorf("the limiter admitted at most %d in a window, want exactly %d", got, n)
	}
	if got := maxInWindow(theirs, int64(per)); got != 2*n-1 {
		t.Errorf("GCRA admitted at most %d in a window; the reason it is not used is that it admits %d", got, 2*n-1)
	}
}

// gcra is the generic cell rate algorithm with a burst: the alternative
// TestBurstAcrossBoundary measures.
type gcra struct {
	interval time.Duration
	burst    int
	tat      time.Time // theoretical arrival time
}

func (g *gcra) admit(now time.Time) bool {
	tat := g.tat
	if tat.Before(now) {
		tat = now
	}
	if tat.Sub(now) > time.Duration(g.burst-1)*g.interval {
		return false
	}
	g.tat = tat.Add(g.interval)
	return true
}

// A call is admitted at all its keys or at none: a full key refuses it,
// and the other keys are left as they were.
func TestAllOrNothing(t *testing.T) {
	checkAllOrNothing(t, newLimiter(t, map[string]Limit{"p": {N: 2, Per: time.Minute}, "r": {N: 1, Per: time.Minute}}))
}

func checkAllOrNothing(t *testing.T, l Store) {
	parent, child := Key{"p", "root"}, Key{"p", "root/a"}
	if _, err := l.Reserve([]Key{parent, child, {"r", "root/a"}}, t0); err != nil {
		t.Fatal(err)
	}
	_, err := l.Reserve([]Key{parent, child, {"r", "root/a"}}, t0.Add(time.Second))
	var lim *LimitedError
	if !errors.As(err, &lim) || lim.Key != (Key{"r", "root/a"}) {
		t.Fatalf("second call: %v; want limited at r root/a", err)
	}
	// The parent still has room for exactly one call.
	if _, err := l.Reserve([]Key{parent}, t0.Add(2*time.Second)); err != nil {
		t.Fatalf("the refused call took the parent's slot: %v", err)
	}
	if _, err := l.Reserve([]Key{parent}, t0.Add(3*time.Second)); !errors.Is(err, ErrLimited) {
		t.Fatalf("third call at the parent: %v; want limited", err)
	}
}

// A key given twice counts once; no keys admit nothing and never refuse.
func TestRepeatedAndNoKeys(t *testing.T) {
	checkRepeatedAndNoKeys(t, newLimiter(t, map[string]Limit{"p": {N: 2, Per: time.Minute}}))
}

func checkRepeatedAndNoKeys(t *testing.T, l Store) {
	k := Key{"p", "d"}
	if _, err := l.Reserve([]Key{k, k}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve([]Key{k}, t0); err != nil {
		t.Fatalf("a repeated key counted twice: %v", err)
	}
	for range 3 {
		if a, err := l.Reserve(nil, t0); err != nil || a.at != 0 || a.keys != nil || a.released != nil {
			t.Fatalf("no keys: %+v, %v", a, err)
		}
	}
}

// Release gives the slots back, once.
func TestRelease(t *testing.T) {
	checkRelease(t, newLimiter(t, map[string]Limit{"p": {N: 1, Per: time.Minute}}))
}

func checkRelease(t *testing.T, l Store) {
	k := []Key{{"p", "a"}, {"p", "b"}}
	a, err := l.Reserve(k, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(k[1:], t0); !errors.Is(err, ErrLimited) {
		t.Fatalf("before the release: %v", err)
	}
	if err := l.Release(a); err != nil {
		t.Fatal(err)
	}
	b, err := l.Reserve(k[1:], t0)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	// Releasing a again must not take back b's slot.
	if err := l.Release(a); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(k[1:], t0); !errors.Is(err, ErrLimited) {
		t.Fatalf("a second release freed another call's slot: %v (b at %d)", err, b.at)
	}
	if err := l.Release(Admission{}); err != nil {
		t.Fatal(err)
	}
}

// Bad limits and keys are errors, not admissions.
func TestBadInput(t *testing.T) {
	for _, lim := range []Limit{{N: 0, Per: time.Second}, {N: MaxN + 1, Per: time.Second}, {N: 1}, {N: 1, Per: MaxPer + 1}} {
		if _, err := New(map[string]Limit{"p": lim}); err == nil {
			t.Errorf("New accepted %+v", lim)
		}
	}
	l := newLimiter(t, map[string]Limit{"p": {N: 1, Per: time.Second}})
	many := make([]Key, MaxKeys+1)
	for i := range many {
		many[i] = Key{"p", string(rune('a' + i%26))}
	}
	for _, keys := range [][]Key{{{"q", "d"}}, {{"p", ""}}, {{"p", "\xff"}}, many} {
		if _, err := l.Reserve(keys, t0); err == nil || errors.Is(err, ErrLimited) {
			t.Errorf("Reserve(%.40v) = %v; want an error other than limited", keys, err)
		}
	}
	l.Close()
	if _, err := l.Reserve([]Key{{"p", "d"}}, t0); err == nil {
		t.Error("a closed limiter admitted a call")
	}
}

// Keys whose last admission left their window are dropped once there are
// many keys, and dropping them changes no decision.
func TestSweep(t *testing.T) {
	l := newLimiter(t, map[string]Limit{"p": {N: 1, Per: time.Second}})
	for i := range 3 * minSweep {
		if _, err := l.Reserve([]Key{{"p", string(rune(0x100 + i))}}, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(l.windows); n > 2*minSweep {
		t.Fatalf("%d keys kept, of which at most 1000 are in their window", n)
	}
	last := string(rune(0x100 + 3*minSweep - 1))
	if _, err := l.Reserve([]Key{{"p", last}}, t0.Add(time.Duration(3*minSweep)*time.Millisecond)); !errors.Is(err, ErrLimited) {
		t.Fatalf("a key in its window was forgotten: %v", err)
	}
}

// Goroutines calling at once, on the real clock, at keys they share:
// every key's admissions fit its limit in every window.
func TestConcurrentReserve(t *testing.T) {
	limits := map[string]Limit{"p": {N: 20, Per: 50 * time.Millisecond}, "r": {N: 7, Per: 20 * time.Millisecond}}
	checkConcurrentReserve(t, limits, 300*time.Millisecond, memoryTested(newLimiter(t, limits)))
}

// checkConcurrentReserve has eight goroutines call for d, each on one of
// stores (which share their logs), at keys that the stores share.
func checkConcurrentReserve(t *testing.T, limits map[string]Limit, d time.Duration, stores ...tested) {
	var (
		mu       sync.Mutex
		admitted = map[Key][]int64{}
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for g := range 8 {
		wg.Go(func() {
			l := stores[(g/2)%len(stores)]
			leaf := Key{"p", "root/" + string(rune('a'+g%3))}
			keys := []Key{{"p", "root"}, leaf, {"r", leaf.Level}}
			for time.Now().Before(deadline) {
				a, err := l.Reserve(keys[:1+g%3], time.Now())
				if errors.Is(err, ErrLimited) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if g%5 == 0 {
					// Some calls are given back, as a budget refusal does.
					if err := l.Release(a); err != nil {
						t.Error(err)
					}
					continue
				}
				mu.Lock()
				for _, k := range keys[:1+g%3] {
					admitted[k] = append(admitted[k], a.at)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(admitted) == 0 {
		t.Fatal("nothing was admitted")
	}
	for k, ts := range admitted {
		slices.Sort(ts)
		if got := maxInWindow(ts, stores[0].in(limits[k.Limit].Per)); got > limits[k.Limit].N {
			t.Errorf("%s admitted %d in one window, limit %d", k, got, limits[k.Limit].N)
		}
	}
}
