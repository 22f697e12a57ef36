package budget

import (
	"bytes"
	"errors"
	"fmt"
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
	opCommit  = "commit"  // actual − reserved for reservation id (≠ 0)
	opRelease = "release" // −reserved for reservation id (< 0)
)

// entry is one line of the spend log.
type entry struct {
	op    string
	id    uint64 // the reservation, numbered from 1 since the store was opened; 0 for a total
	delta int64
	keys  []string
}

// entryJSON is the form of a line, for decoding only: appendEntry writes it.
type entryJSON struct {
	Op    string   `json:"op"`
	ID    uint64   `json:"id"`
	Delta int64    `json:"delta"`
	Keys  []string `json:"keys"`
}

// appendEntry appends e as one line of canonical JSON (members in this
// order, no whitespace) and a newline:
//
//	{"op":"reserve","id":7,"delta":2500,"keys":["ISSUER/del_root","ISSUER/del_root/del_a"]}
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
	return append(dst, "]}\n"...)
}

// parseLog calls apply for each line of data in order and returns the
// length of the lines it read. What follows the last newline is a line
// torn by a crash during its write, whose Reserve never returned, so it is
// not read (and the returned length excludes it). A line that does not
// parse, or that apply refuses, is an error naming the line.
func parseLog(data []byte, apply func(entry) error) (n int, err error) {
	for line := 1; ; line++ {
		end := bytes.IndexByte(data[n:], '\n')
		if end < 0 {
			return n, nil
		}
		e, err := parseEntry(data[n : n+end])
		if err == nil {
			err = apply(e)
		}
		if err != nil {
			return n, fmt.Errorf("line %d: %w", line, err)
		}
		n += end + 1
	}
}

func parseEntry(line []byte) (entry, error) {
	if len(line) == 0 {
		return entry{}, errors.New("empty line")
	}
	if len(line) > maxLineLen {
		return entry{}, fmt.Errorf("%d bytes, over the limit of %d", len(line), maxLineLen)
	}
	var j entryJSON
	if err := strictjson.Unmarshal(line, &j); err != nil {
		return entry{}, err
	}
	e := entry{op: j.Op, id: j.ID, delta: j.Delta, keys: j.Keys}
	return e, e.check()
}

// check refuses a line the writer would not have written.
func (e entry) check() error {
	var sign func(int64) bool
	switch e.op {
	case opTotal:
		if e.id != 0 {
			return errors.New("a total has no reservation id")
		}
		if len(e.keys) != 1 {
			return errors.New("a total names exactly one key")
		}
		sign = func(d int64) bool { return d > 0 }
	case opReserve:
		sign = func(d int64) bool { return d > 0 }
	case opCommit:
		sign = func(d int64) bool { return d != 0 }
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

// replay applies one line to the ledger. A spend that would fall below
// zero is corruption: the writer only subtracts what it added before.
func (l *ledger) replay(e entry) error {
	for _, k := range e.keys {
		if addSat(l.spent[k], e.delta) < 0 {
			return fmt.Errorf("the spend of %q would fall below zero", k)
		}
	}
	l.add(e.keys, e.delta)
	return nil
}

// appendTotals appends one total line per key with a spend, in key order.
func (l *ledger) appendTotals(dst []byte) []byte {
	keys := make([]string, 0, len(l.spent))
	for k := range l.spent {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = appendEntry(dst, entry{op: opTotal, delta: l.spent[k], keys: []string{k}})
	}
	return dst
}
