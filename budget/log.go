package budget

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/delegateos/delegateos/internal/jsonlines"
	"slices"
	"strconv"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// The operations a log line records. Each line adds its delta to the spend
// of each of its keys; the operation says why, for a person reading the
// log, and bounds the sign of the delta.
const (
	opTotal   = "total"   // a key's spend at the last compaction (> 0)
	opReserve = "reserve" // cost held by reservation id (> 0)
	opCommit  = "commit"  // actual − reserved for reservation id
	opRelease = "release" // −reserved for reservation id (< 0)
)

// entry is one line of the spend log.
type entry struct {
	op    string
	id    uint64 // the reservation, numbered from 1 since the store was opened; 0 for a total
	delta int64
	keys  []string
	// A reserve that records a call, and a total of keys with recorded
	// calls, carry the call's record: the limit of each key, and the time
	// of the call (of the key's last call, for a total) in Unix
	// milliseconds. A total also carries how many calls the key has had.
	// Lines written before calls were recorded have none of them (limits
	// nil, calls and at 0), and neither has a reserve that carries a
	// reservation over a rewrite.
	limits []int64
	calls  int64
	at     int64
}

// entryJSON is the form of a line, for decoding only: appendEntry writes it.
type entryJSON struct {
	Op     string   `json:"op"`
	ID     uint64   `json:"id"`
	Delta  int64    `json:"delta"`
	Keys   []string `json:"keys"`
	Limits []int64  `json:"limits"`
	Calls  int64    `json:"calls"`
	At     int64    `json:"at"`
}

// appendEntry appends e as one line of canonical JSON (members in this
// order, no whitespace, a call's record only when it has one) and a
// newline:
//
//	{"op":"reserve","id":7,"delta":2500,"keys":["ISSUER/del_root","ISSUER/del_root/del_a"],"limits":[1000000,500000],"at":1767225600000}
func appendEntry(dst []byte, e entry) []byte {
	dst = append(dst, `{"op":`...)
	dst = canon.AppendString(dst, e.op)
	if e.id != 0 {
		dst = append(dst, `,"id":`...)
		dst = strconv.AppendUint(dst, e.id, 10)
	}
	dst = append(dst, `,"delta":`...)
	dst = strconv.AppendInt(dst, e.delta, 10)
	dst = append(dst, `,"keys":[`...)
	for i, k := range e.keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = canon.AppendString(dst, k)
	}
	dst = append(dst, ']')
	if e.limits != nil {
		dst = append(dst, `,"limits":[`...)
		for i, l := range e.limits {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, l, 10)
		}
		dst = append(dst, ']')
	}
	if e.calls != 0 {
		dst = append(dst, `,"calls":`...)
		dst = strconv.AppendInt(dst, e.calls, 10)
	}
	if e.at != 0 {
		dst = append(dst, `,"at":`...)
		dst = strconv.AppendInt(dst, e.at, 10)
	}
	return append(dst, "}\n"...)
}

// parseLog calls apply for each entry of data in order and returns the
// length of the lines it read (see jsonlines.Read: a torn last line is
// not read; a line that does not parse, or that apply refuses, is an error
// naming the line).
func parseLog(data []byte, apply func(entry) error) (n int, err error) {
	return jsonlines.Read(data, func(line []byte) error {
		e, err := parseEntry(line)
		if err == nil {
			err = apply(e)
		}
		return err
	})
}

func parseEntry(line []byte) (entry, error) {
	if err := jsonlines.Check(line, maxLineLen); err != nil {
		return entry{}, err
	}
	var j entryJSON
	if err := strictjson.Unmarshal(line, &j); err != nil {
		return entry{}, err
	}
	e := entry{op: j.Op, id: j.ID, delta: j.Delta, keys: j.Keys, limits: j.Limits, calls: j.Calls, at: j.At}
	return e, e.check()
}

// check refuses a line the writer would not have written.
func (e entry) check() error {
	if err := e.checkRecord(); err != nil {
		return err
	}
	recorded := e.at != 0
	var sign func(int64) bool
	switch e.op {
	case opTotal:
		if e.id != 0 {
			return errors.New("a total has no reservation id")
		}
		if len(e.keys) != 1 {
			return errors.New("a total names exactly one key")
		}
		// A key whose calls were all free has a total of nothing spent.
		sign = func(d int64) bool { return d > 0 || d == 0 && recorded }
	case opReserve:
		// A free call is recorded with a reserve of nothing.
		sign = func(d int64) bool { return d > 0 || d == 0 && recorded }
	case opCommit:
		sign = func(int64) bool { return true }
	case opRelease:
		sign = func(d int64) bool { return d < 0 }
	default:
		return fmt.Errorf("unknown op %q", e.op)
	}
	if e.op != opTotal && e.id == 0 {
		return fmt.Errorf("a %s needs a reservation id", e.op)
	}
	if !sign(e.delta) {
		return fmt.Errorf("a %s cannot have a delta of %d", e.op, e.delta)
	}
	if len(e.keys) == 0 || len(e.keys) > MaxLevels {
		return fmt.Errorf("%d keys; a line names 1 to %d", len(e.keys), MaxLevels)
	}
	for i, k := range e.keys {
		if err := checkKey(k); err != nil {
			return err
		}
		if slices.Contains(e.keys[:i], k) {
			return fmt.Errorf("key %q appears twice", k)
		}
	}
	return nil
}

// checkRecord refuses a call's record on a line that cannot have one, and
// a record that is not whole.
func (e entry) checkRecord() error {
	if e.limits == nil && e.calls == 0 && e.at == 0 {
		return nil
	}
	switch e.op {
	case opReserve:
		if e.calls != 0 {
			return errors.New("a reserve has no count of calls")
		}
	case opTotal:
		if e.calls <= 0 {
			return fmt.Errorf("a total with a call's record needs a count of calls, not %d", e.calls)
		}
	default:
		return fmt.Errorf("a %s has no call's record", e.op)
	}
	if e.at <= 0 || e.at > maxAt {
		return fmt.Errorf("the time of a call is %d, outside 1..%d", e.at, int64(maxAt))
	}
	if len(e.limits) != len(e.keys) {
		return fmt.Errorf("%d limits for %d keys", len(e.limits), len(e.keys))
	}
	for _, l := range e.limits {
		if l < 0 {
			return fmt.Errorf("negative limit %d", l)
		}
	}
	return nil
}

// replay applies one line to the ledger. A spend that would fall below
// zero is corruption: the writer only subtracts what it added before.
func (l *ledger) replay(e entry) error {
	for _, k := range e.keys {
		if addSat(l.spent[k], e.delta) < 0 {
			return fmt.Errorf("the spend of %q would fall below zero", k)
		}
	}
	l.add(e.keys, e.delta)
	if e.at != 0 {
		calls := int64(1)
		if e.op == opTotal {
			calls = e.calls
		}
		l.record(e.keys, e.limits, calls, e.at)
	}
	return nil
}

// appendTotals appends the log of the ledger as it stands, in key order:
// for each key with a spend or recorded calls, one total of what it has
// committed (and its calls' record), and then, for each open reservation
// with a cost, in the order they were made, one reserve of what it holds,
// without a call's record (the call is in the totals). Reading the lines
// back gives the same spend: a crash after the rewrite counts held cost as
// spent, as before it.
func (l *ledger) appendTotals(dst []byte) []byte {
	keys := make([]string, 0, max(len(l.spent), len(l.calls)))
	for k := range l.spent {
		keys = append(keys, k)
	}
	for k := range l.calls {
		if _, ok := l.spent[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	held := make(map[string]int64)
	open := make([]*Reservation, 0, len(l.open))
	for _, r := range l.open {
		if r.cost == 0 {
			continue
		}
		open = append(open, r)
		for _, k := range r.keys {
			held[k] += r.cost
		}
	}
	slices.SortFunc(open, func(a, b *Reservation) int { return cmp.Compare(a.id, b.id) })
	for _, k := range keys {
		// Held cost is part of spent. Should spent have saturated on its
		// way, the total is kept at zero: the log then over-counts.
		e := entry{op: opTotal, delta: max(l.spent[k]-held[k], 0), keys: []string{k}}
		if c, ok := l.calls[k]; ok {
			e.limits, e.calls, e.at = []int64{c.limit}, c.calls, c.last
		}
		if e.delta > 0 || e.calls > 0 {
			dst = appendEntry(dst, e)
		}
	}
	for _, r := range open {
		dst = appendEntry(dst, entry{op: opReserve, id: r.id, delta: r.cost, keys: r.keys})
	}
	return dst
}
