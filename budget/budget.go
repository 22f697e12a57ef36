package budget

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// A Level is one delegation whose budget a call spends from: Key names
// the delegation (for example "ISSUER/del_root/del_a"), Limit is its
// effective budget in microcents.
type Level struct {
	Key   string
	Limit int64
}

// A Reservation is cost held at every level of one Reserve until it is
// committed or released. It belongs to the store that made it and ends
// exactly once.
type Reservation struct {
	owner *ledger
	id    uint64
	keys  []string // distinct, in the order given
	cost  int64
}

// Cost returns the cost the reservation holds.
func (r *Reservation) Cost() int64 { return r.cost }

// A Store records spend per key and refuses reservations that would take
// any level over its limit. Implementations are safe for concurrent use.
type Store interface {
	// Reserve holds cost at every level, atomically: it succeeds only if,
	// at every level, the key's spent (committed plus held) is below the
	// limit and spent+cost is within it. Otherwise it returns an
	// *ExceededError naming the first level, root first, that refuses.
	Reserve(levels []Level, cost int64) (*Reservation, error)
	// Commit replaces the held cost by actual at every level of r. An
	// actual above the held cost is charged in full, even past a limit:
	// the money is spent, and the next Reserve refuses.
	Commit(r *Reservation, actual int64) error
	// Release drops what r holds: the call never reached the upstream.
	Release(r *Reservation) error
	// Spent returns what key has committed plus what it holds.
	Spent(key string) int64
	// Close releases the store's resources.
	Close() error
}

// ErrExceeded is matched (errors.Is) by every *ExceededError.
var ErrExceeded = errors.New("budget exceeded")

// ExceededError is a Reserve refused because a level has no room: Spent
// (committed plus held) at Key is at or over Limit, or Spent+Cost is over it.
type ExceededError struct {
	Key                string
	Limit, Spent, Cost int64
}

func (e *ExceededError) Error() string {
	if e.Spent >= e.Limit {
		return fmt.Sprintf("budget exceeded at %s: spent %d of a budget of %d microcents", e.Key, e.Spent, e.Limit)
	}
	return fmt.Sprintf("budget exceeded at %s: a call costing %d microcents does not fit in the %d left of %d (spent %d)",
		e.Key, e.Cost, e.Limit-e.Spent, e.Limit, e.Spent)
}

// Is makes errors.Is(err, ErrExceeded) hold.
func (e *ExceededError) Is(target error) bool { return target == ErrExceeded }

// checkReserve validates the arguments of Reserve and returns the distinct
// keys in order. A reservation without levels would spend against nothing,
// so it is an error, not a free pass.
func checkReserve(levels []Level, cost int64) ([]string, error) {
	if cost < 0 {
		return nil, fmt.Errorf("budget: negative cost %d", cost)
	}
	if len(levels) == 0 {
		return nil, errors.New("budget: a reservation needs at least one level")
	}
	if len(levels) > MaxLevels {
		return nil, fmt.Errorf("budget: %d levels, over the limit of %d", len(levels), MaxLevels)
	}
	keys := make([]string, 0, len(levels))
	for _, l := range levels {
		if l.Limit < 0 {
			return nil, fmt.Errorf("budget: negative limit %d for %q", l.Limit, l.Key)
		}
		if err := checkKey(l.Key); err != nil {
			return nil, err
		}
		if !contains(keys, l.Key) {
			keys = append(keys, l.Key)
		}
	}
	return keys, nil
}

// checkKey refuses keys the log could not hold exactly: invalid UTF-8
// would be written as U+FFFD and read back as another key.
func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("budget: empty key")
	case len(key) > MaxKeyLen:
		return fmt.Errorf("budget: key of %d bytes, over the limit of %d", len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("budget: key %q is not valid UTF-8", key)
	}
	return nil
}

func checkActual(actual int64) error {
	if actual < 0 {
		return fmt.Errorf("budget: negative actual cost %d", actual)
	}
	return nil
}

// contains is a linear search: a reservation has a handful of levels.
func contains(keys []string, key string) bool {
	for _, k := range keys {
		if k == key {
			return true
		}
	}
	return false
}
