package ratelimit

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// A Limit admits at most N calls in any window of length Per.
type Limit struct {
	N   int
	Per time.Duration
}

func (l Limit) String() string { return fmt.Sprintf("%d/%s", l.N, l.Per) }

func (l Limit) check() error {
	if l.N < 1 || l.N > MaxN {
		return fmt.Errorf("ratelimit: N of %d, want 1 to %d", l.N, MaxN)
	}
	if l.Per <= 0 || l.Per > MaxPer {
		return fmt.Errorf("ratelimit: a window of %s, want more than 0 and at most %s", l.Per, MaxPer)
	}
	return nil
}

// A Key names one log: the limit given to New or OpenFile under the name
// Limit, applied at Level (a delegation, say).
type Key struct {
	Limit, Level string
}

func checkKey(k Key) error {
	switch {
	case k.Limit == "" || len(k.Limit) > MaxNameLen || !utf8.ValidString(k.Limit):
		return fmt.Errorf("ratelimit: limit name %q is not 1 to %d bytes of UTF-8", k.Limit, MaxNameLen)
	case k.Level == "" || len(k.Level) > MaxLevelLen || !utf8.ValidString(k.Level):
		return fmt.Errorf("ratelimit: level %q is not 1 to %d bytes of UTF-8", k.Level, MaxLevelLen)
	}
	return nil
}

// An Admission is a call admitted at its keys. Its zero value admitted
// nothing.
type Admission struct {
	keys []Key
	at   int64 // Unix nanoseconds; microseconds in Redis
	// released is set by a Redis store, whose admission times are unique
	// at a key only while they are held, so that a second Release does
	// nothing.
	released *atomic.Bool
}

// ErrLimited is matched (errors.Is) by every *LimitedError.
var ErrLimited = errors.New("rate limited")

// LimitedError is a Reserve refused because Key has admitted Limit.N calls
// in the last Limit.Per. RetryAfter is how long until a call at the same
// keys would be admitted, if no other is admitted first. When several keys
// refuse, it is the one whose wait is longest.
type LimitedError struct {
	Key        Key
	Limit      Limit
	RetryAfter time.Duration
}

func (e *LimitedError) Error() string {
	return fmt.Sprintf("rate limit %s of %s reached at %s: retry after %s", e.Limit, e.Key.Limit, e.Key.Level, e.RetryAfter)
}

// Is makes errors.Is(err, ErrLimited) hold.
func (e *LimitedError) Is(target error) bool { return target == ErrLimited }

// Limiter admits calls within named limits at any number of keys. Build it
// with New or OpenFile.
type Limiter struct {
	limits map[string]Limit
	// base anchors the clock: a time's nanoseconds are base's Unix
	// nanoseconds plus its monotonic distance from base, so that a jump
	// of the wall clock neither frees nor blocks calls in this process.
	base     time.Time
	baseNano int64

	mu      sync.Mutex // guards everything below
	windows map[Key]*window
	last    int64 // the latest admission time handed out
	sweepAt int   // the number of keys at which idle ones are dropped
	file    *file // nil when the logs are kept in memory only
	closed  bool
}

// window is one key's log: the times of its last admissions, ascending,
// at most its limit's N.
type window struct {
	times []int64
}

// New returns a Limiter that keeps its logs in memory, with the limits
// named in limits.
func New(limits map[string]Limit) (*Limiter, error) {
	own, err := ownLimits(limits)
	if err != nil {
		return nil, err
	}
	base := time.Now()
	return &Limiter{limits: own, base: base, baseNano: base.UnixNano(), windows: map[Key]*window{}, sweepAt: minSweep}, nil
}

// ownLimits checks limits and returns a copy.
func ownLimits(limits map[string]Limit) (map[string]Limit, error) {
	own := make(map[string]Limit, len(limits))
	for name, lim := range limits {
		if err := lim.check(); err != nil {
			return nil, fmt.Errorf("%w (limit %q)", err, name)
		}
		if err := checkKey(Key{Limit: name, Level: "-"}); err != nil {
			return nil, err
		}
		own[name] = lim
	}
	return own, nil
}

// catchUpWall moves the Limiter's clock forward to the wall clock's when
// it has fallen behind by a second or more: the monotonic clock stops
// while the machine sleeps and does not follow a step forward, and the
// file is read back by the wall clock, so times it held an hour behind
// would free every window at the next start. Every time held moves with
// the clock (the limits only get stricter; an admission taken before the
// move is no longer found to release) and the file is rewritten. A wall
// clock that falls behind changes nothing.
func (l *Limiter) catchUpWall(now time.Time) {
	d := now.UnixNano() - l.nanos(now)
	if d < int64(time.Second) {
		return
	}
	l.baseNano += d
	for _, w := range l.windows {
		for i := range w.times {
			w.times[i] += d
		}
	}
	if l.last != 0 {
		l.last += d
	}
	if l.file != nil {
		// A failure leaves the file dirty: it is rewritten, or admissions
		// are refused, at the next write.
		_ = l.file.compact(l.appendLogs)
	}
}

// nanos is t on the Limiter's clock.
func (l *Limiter) nanos(t time.Time) int64 { return l.baseNano + int64(t.Sub(l.base)) }

// Reserve admits a call at every key at time now, or at none. It refuses
// with a *LimitedError when a key has admitted its limit's N calls within
// its window before now; with another error when a key is malformed or
// names no limit, or when the admission cannot be written to the file. A
// key given twice counts once. Without keys it admits nothing and always
// succeeds.
//
// The Admission refers to keys: they must not change until it is released
// or forgotten.
func (l *Limiter) Reserve(keys []Key, now time.Time) (Admission, error) {
	if len(keys) == 0 {
		return Admission{}, nil
	}
	if err := checkKeys(l.limits, keys); err != nil {
		return Admission{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Admission{}, errors.New("ratelimit: the limiter is closed")
	}
	l.catchUpWall(now)
	t := max(l.nanos(now), l.last+1)
	// Each key's log, looked up once; nil for a repeated key.
	var small [8]*window
	ws := small[:0]
	if len(keys) > len(small) {
		ws = make([]*window, 0, len(keys))
	}
	var worst *LimitedError
	for i, k := range keys {
		if repeated(keys, i) {
			ws = append(ws, nil)
			continue
		}
		lim := l.limits[k.Limit]
		w := l.windows[k]
		if w == nil {
			w = &window{}
		}
		ws = append(ws, w)
		if wait := w.wait(lim, t); wait > 0 && (worst == nil || time.Duration(wait) > worst.RetryAfter) {
			worst = &LimitedError{Key: k, Limit: lim, RetryAfter: time.Duration(wait)}
		}
	}
	if worst != nil {
		return Admission{}, worst
	}
	// Times handed out stay unique even if the admission is undone below.
	l.last = t
	for i, k := range keys {
		w := ws[i]
		if w == nil {
			continue
		}
		if len(w.times) == 0 {
			l.windows[k] = w
		}
		w.add(t, l.limits[k.Limit])
	}
	a := Admission{keys: keys, at: t}
	if l.file != nil {
		if err := l.file.admit(a, len(l.windows), l.appendLogs); err != nil {
			l.remove(a)
			return Admission{}, err
		}
	}
	l.sweep(t)
	return a, nil
}

// Release gives back the slots a holds, for a call that was admitted but
// not made. Releasing an admission again, or its zero value, does nothing.
// If the release cannot be written to the file it still takes effect in
// this process; the file keeps counting the call until it is rewritten.
func (l *Limiter) Release(a Admission) error {
	if a.at == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("ratelimit: the limiter is closed")
	}
	removed := l.remove(a)
	if len(removed) == 0 || l.file == nil {
		return nil
	}
	return l.file.release(Admission{keys: removed, at: a.at}, len(l.windows), l.appendLogs)
}

// remove takes a's time out of each of its keys and returns the keys it
// was in.
func (l *Limiter) remove(a Admission) []Key {
	var removed []Key
	for _, k := range a.keys {
		w := l.windows[k]
		if w == nil || !w.remove(a.at) {
			continue
		}
		removed = append(removed, k)
		if len(w.times) == 0 {
			delete(l.windows, k)
		}
	}
	return removed
}

// Close writes the file compactly, if there is one, and lets it go. A
// closed Limiter refuses every call. Closing twice does nothing.
func (l *Limiter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.file == nil {
		return nil
	}
	return l.file.close(l.appendLogs)
}

// checkKeys refuses keys Reserve cannot admit at under limits.
func checkKeys(limits map[string]Limit, keys []Key) error {
	if len(keys) > MaxKeys {
		return fmt.Errorf("ratelimit: %d keys, over the limit of %d", len(keys), MaxKeys)
	}
	for _, k := range keys {
		if _, ok := limits[k.Limit]; !ok {
			return fmt.Errorf("ratelimit: no limit is named %q", k.Limit)
		}
		if err := checkKey(k); err != nil {
			return err
		}
	}
	return nil
}

// repeated reports whether keys[i] comes earlier in keys: a linear search,
// since a call has a handful of keys.
func repeated(keys []Key, i int) bool {
	for _, k := range keys[:i] {
		if k == keys[i] {
			return true
		}
	}
	return false
}

// sweep drops, once there are enough keys, the keys whose last admission
// is outside their window: an empty log decides the same.
func (l *Limiter) sweep(now int64) {
	if len(l.windows) < l.sweepAt {
		return
	}
	for k, w := range l.windows {
		if w.times[len(w.times)-1] <= now-int64(l.limits[k.Limit].Per) {
			delete(l.windows, k)
		}
	}
	l.sweepAt = max(2*len(l.windows), minSweep)
}

// wait is how long, in nanoseconds, a call at t must wait to be admitted
// under lim: until the N-th most recent admission is lim.Per old. It is 0
// or less when the call may go now.
func (w *window) wait(lim Limit, t int64) int64 {
	if w == nil || len(w.times) < lim.N {
		return 0
	}
	return w.times[len(w.times)-lim.N] + int64(lim.Per) - t
}

// add appends t, the latest time, and forgets what lim no longer counts:
// times beyond the last N, and times outside the window that ends at t.
func (w *window) add(t int64, lim Limit) {
	start := max(len(w.times)+1-lim.N, 0)
	for start < len(w.times) && w.times[start] <= t-int64(lim.Per) {
		start++
	}
	w.times = append(w.times[start:], t)
}

// remove takes t out of the log and reports whether it was there. An
// admission that is released is almost always the latest.
func (w *window) remove(t int64) bool {
	for i := len(w.times) - 1; i >= 0 && w.times[i] >= t; i-- {
		if w.times[i] == t {
			w.times = append(w.times[:i], w.times[i+1:]...)
			return true
		}
	}
	return false
}
