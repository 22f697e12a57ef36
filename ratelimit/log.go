package ratelimit

import (
	"errors"
	"fmt"
	"github.com/delegateos/delegateos/internal/jsonlines"
	"slices"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// opRelease marks a release line; an admission line has no op.
const opRelease = "release"

// entry is one line of the file.
type entry struct {
	op   string
	at   []int64
	keys []Key
}

// entryJSON is the form of a line, for decoding only: appendEntry writes it.
type entryJSON struct {
	Op   string     `json:"op"`
	At   []int64    `json:"at"`
	Keys [][]string `json:"keys"`
}

// appendEntry appends e as one line of JSON (members in this order, no
// whitespace) and a newline, writing each key once:
//
//	{"op":"release","at":[1712345678901234567],"keys":[["policy","ISSUER/9:del_a1b2c"]]}
func appendEntry(dst []byte, e entry) []byte {
	dst = append(dst, '{')
	if e.op != "" {
		dst = append(dst, `"op":`...)
		dst = canon.AppendString(dst, e.op)
		dst = append(dst, ',')
	}
	dst = append(dst, `"at":[`...)
	for i, t := range e.at {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, t, 10)
	}
	dst = append(dst, `],"keys":[`...)
	for i, k := range e.keys {
		if repeated(e.keys, i) {
			continue
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = canon.AppendString(dst, k.Limit)
		dst = append(dst, ',')
		dst = canon.AppendString(dst, k.Level)
		dst = append(dst, ']')
	}
	return append(dst, "]}\n"...)
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
	e := entry{op: j.Op, at: j.At}
	for _, k := range j.Keys {
		if len(k) != 2 {
			return entry{}, errors.New("a key is a limit's name and a level: [NAME, LEVEL]")
		}
		e.keys = append(e.keys, Key{Limit: k[0], Level: k[1]})
	}
	return e, e.check()
}

// check refuses a line the writer would not have written.
func (e entry) check() error {
	switch e.op {
	case "":
		if len(e.at) == 0 || len(e.at) > maxLineTimes {
			return fmt.Errorf("%d times; an admission line has 1 to %d", len(e.at), maxLineTimes)
		}
	case opRelease:
		if len(e.at) != 1 {
			return errors.New("a release line has one time")
		}
	default:
		return fmt.Errorf("unknown op %q", e.op)
	}
	for _, t := range e.at {
		if t <= 0 {
			return fmt.Errorf("time %d is not after 1970", t)
		}
	}
	if len(e.keys) == 0 || len(e.keys) > MaxKeys {
		return fmt.Errorf("%d keys; a line names 1 to %d", len(e.keys), MaxKeys)
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

// replay applies one line of the file to the logs. A key whose limit is
// no longer given is skipped: its calls no longer count. The logs are put
// in order by settle once every line is read.
func (l *Limiter) replay(e entry) error {
	for _, k := range e.keys {
		if _, ok := l.limits[k.Limit]; !ok {
			continue
		}
		w := l.windows[k]
		if w == nil {
			w = &window{}
			l.windows[k] = w
		}
		if e.op == opRelease {
			if i := slices.Index(w.times, e.at[0]); i >= 0 {
				w.times = slices.Delete(w.times, i, i+1)
			}
			continue
		}
		w.times = append(w.times, e.at...)
	}
	return nil
}

// settle puts the logs read from a file in order as of now: each sorted,
// a time after now taken as now (the clock may have been set back), times
// outside the window dropped, at most N kept. Later admissions come after
// every time kept.
func (l *Limiter) settle(now int64) {
	for k, w := range l.windows {
		lim := l.limits[k.Limit]
		slices.Sort(w.times)
		for i := len(w.times) - 1; i >= 0 && w.times[i] > now; i-- {
			w.times[i] = now
		}
		start, _ := slices.BinarySearch(w.times, now-int64(lim.Per)+1)
		start = max(start, len(w.times)-lim.N)
		w.times = slices.Clip(w.times[start:])
		if len(w.times) == 0 {
			delete(l.windows, k)
			continue
		}
		l.last = max(l.last, w.times[len(w.times)-1])
	}
}

// appendLogs appends what the logs hold that a later admission could still
// count, as admission lines of one key each, in key order.
func (l *Limiter) appendLogs(dst []byte) []byte {
	keys := make([]Key, 0, len(l.windows))
	for k := range l.windows {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int {
		if c := strings.Compare(a.Limit, b.Limit); c != 0 {
			return c
		}
		return strings.Compare(a.Level, b.Level)
	})
	for _, k := range keys {
		times := l.windows[k].times
		start, _ := slices.BinarySearch(times, l.last-int64(l.limits[k.Limit].Per)+1)
		for times = times[start:]; len(times) > 0; {
			n := min(len(times), maxLineTimes)
			dst = appendEntry(dst, entry{at: times[:n], keys: []Key{k}})
			times = times[n:]
		}
	}
	return dst
}
