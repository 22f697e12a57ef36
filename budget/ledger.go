package budget

import (
	"errors"
	"math"
)

// ledger is the accounting Memory and File share. Its zero value is empty
// and ready; callers hold their store's lock around every method.
type ledger struct {
	spent  map[string]int64        // committed plus held per key; a missing key is 0
	open   map[uint64]*Reservation // reservations neither committed nor released
	lastID uint64
	// calls is the record of each key's calls, kept by File only.
	calls map[string]callRecord
}

// callRecord is what the log records of a key's calls: how many there have
// been, the time of the last (Unix milliseconds), and the key's limit as
// that call gave it.
type callRecord struct {
	calls, last, limit int64
}

// record counts calls more calls at keys, the last at time at (Unix
// milliseconds), with the limits given for them (parallel to keys).
func (l *ledger) record(keys []string, limits []int64, calls, at int64) {
	if l.calls == nil {
		l.calls = make(map[string]callRecord)
	}
	for i, k := range keys {
		c := l.calls[k]
		c.calls = addSat(c.calls, calls)
		if at >= c.last {
			c.last, c.limit = at, limits[i]
		}
		l.calls[k] = c
	}
}

// unrecord puts back the records of keys as they were before a record
// (prev, parallel to keys), for a call the log could not record.
func (l *ledger) unrecord(keys []string, prev []callRecord) {
	for i, k := range keys {
		if prev[i].calls == 0 {
			delete(l.calls, k)
		} else {
			l.calls[k] = prev[i]
		}
	}
}

// admit refuses cost if any level has no room for it, naming the first
// such level (root first). A level at or over its limit refuses even a
// cost of zero, as verification does (§10.1 step 6: spent ≥ budget).
func (l *ledger) admit(levels []Level, cost int64) error {
	for _, lv := range levels {
		s := l.spent[lv.Key]
		if s >= lv.Limit || cost > lv.Limit-s {
			return &ExceededError{Key: lv.Key, Limit: lv.Limit, Spent: s, Cost: cost}
		}
	}
	return nil
}

// hold records a new reservation of cost at keys.
func (l *ledger) hold(keys []string, cost int64) *Reservation {
	if l.open == nil {
		l.open = make(map[uint64]*Reservation)
	}
	l.lastID++
	r := &Reservation{owner: l, id: l.lastID, keys: keys, cost: cost}
	l.open[r.id] = r
	l.add(keys, cost)
	return r
}

// unhold undoes hold exactly, for a reservation the log could not record.
// hold never saturates (admit keeps spent+cost within a limit), so
// subtracting restores every key.
func (l *ledger) unhold(r *Reservation) {
	delete(l.open, r.id)
	l.add(r.keys, -r.cost)
}

// end ends r, so that it is committed or released exactly once. A copy of
// a Reservation is not the reservation: only the pointer Reserve returned
// ends it.
func (l *ledger) end(r *Reservation) error {
	switch {
	case r == nil:
		return errors.New("budget: nil reservation")
	case r.owner != l:
		return errors.New("budget: the reservation was made by another store")
	case l.open[r.id] != r:
		return errors.New("budget: the reservation has already been committed or released")
	}
	delete(l.open, r.id)
	return nil
}

// add adds delta to the spend of each key. A spend that would pass
// MaxInt64 stays there: it only happens after commits far over a limit,
// and a spend at MaxInt64 refuses every reservation.
func (l *ledger) add(keys []string, delta int64) {
	if l.spent == nil {
		l.spent = make(map[string]int64)
	}
	for _, k := range keys {
		if v := addSat(l.spent[k], delta); v != 0 {
			l.spent[k] = v
		} else {
			delete(l.spent, k)
		}
	}
}

func addSat(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}
