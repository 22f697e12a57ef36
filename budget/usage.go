package budget

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/sqlitedb"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// maxReadBytes bounds the spend log ReadUsage reads: 1 GiB. A File
// rewrites its log as about a line per key every few thousand lines, so a
// log this large is not one it wrote.
var maxReadBytes int64 = 1 << 30

// Usage is what a spend log records of one key.
type Usage struct {
	Key string
	// Committed is the spend of the calls that have settled, and Reserved
	// the cost held by reservations not yet committed or released: calls
	// in flight, or calls whose proxy stopped before it settled them (the
	// next proxy to open the store counts those as committed). Their sum
	// is what the store's Spent returns for the key.
	Committed, Reserved int64
	// Recorded reports whether the log records the key's calls; a log
	// written before calls were recorded has only its spend. Calls counts
	// the reservations the log records (calls a proxy allowed, those that
	// cost nothing included), LastCall is the time of the last, and Limit
	// is the key's limit as that call gave it.
	Recorded bool
	Calls    int64
	LastCall time.Time
	Limit    int64
}

// ReadUsage reads the spend log at path and returns what it records of
// each key, in key order. It takes no lock, and so may read a log that a
// running File is writing: it reads the lines complete when it reaches
// them, and a last line without its newline (one being appended, or torn
// by a crash) is not read. It reads as strictly as OpenFile, and checks
// besides that commits and releases match the reservations they end; a
// line that does not read is an error naming it, and so is a log over
// 1 GiB. A missing log is an error matching fs.ErrNotExist.
//
// A redis:// or rediss:// URL reads the Redis store there instead.
func ReadUsage(path string) ([]Usage, error) {
	if redisconn.IsURL(path) {
		return readRedisUsage(path)
	}
	if db, err := sqlitedb.IsDB(path); err == nil && db {
		return readSQLiteUsage(path)
	}
	// A FIFO or a device could block the open or never end: the open does
	// not wait, and what was opened must be a regular file.
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("spend store %s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("spend store %s is not a regular file", path)
	}
	us, err := readUsage(f)
	if err != nil {
		return nil, fmt.Errorf("spend store %s: %w", path, err)
	}
	return us, nil
}

// readUsage reads a spend log from r, at most maxReadBytes of it.
func readUsage(r io.Reader) ([]Usage, error) {
	var u usageReader
	br := bufio.NewReaderSize(io.LimitReader(r, maxReadBytes+1), 64<<10)
	var long []byte // a line longer than br's buffer, gathered
	read := int64(0)
	for line := 1; ; {
		chunk, err := br.ReadSlice('\n')
		read += int64(len(chunk))
		if read > maxReadBytes {
			return nil, fmt.Errorf("larger than %d bytes: not a spend log the proxy writes", maxReadBytes)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if len(long)+len(chunk) > maxLineLen {
				return nil, fmt.Errorf("line %d: over the limit of %d bytes", line, maxLineLen)
			}
			long = append(long, chunk...)
			continue
		case errors.Is(err, io.EOF):
			// What follows the last newline is torn, or being written.
			return u.usage(), nil
		case err != nil:
			return nil, err
		}
		if long != nil {
			chunk = append(long, chunk...)
			long = nil
		}
		e, err := parseEntry(chunk[:len(chunk)-1])
		if err == nil {
			err = u.apply(e)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		line++
	}
}

// usageReader replays a log into committed spend, held cost and calls.
type usageReader struct {
	keys map[string]*Usage
	// open holds the reservations with a cost that no line has ended yet.
	open map[uint64]openHold
}

type openHold struct {
	keys []string
	cost int64
}

func (u *usageReader) key(k string) *Usage {
	if u.keys == nil {
		u.keys = make(map[string]*Usage)
	}
	p := u.keys[k]
	if p == nil {
		p = &Usage{Key: k}
		u.keys[k] = p
	}
	return p
}

// apply replays one line. A line that ends a reservation the log no longer
// holds (a rewrite by an earlier version folded it into the totals)
// changes the committed spend. No key's committed spend or held cost may
// fall below zero, nor their sum pass the largest int64: a proxy, whose
// limits come from tokens, never gets near it.
func (u *usageReader) apply(e entry) error {
	switch e.op {
	case opTotal:
		if err := u.add(e.keys, e.delta, 0); err != nil {
			return err
		}
	case opReserve:
		if _, dup := u.open[e.id]; dup {
			return fmt.Errorf("reservation %d is reserved again before it has ended", e.id)
		}
		if e.delta > 0 {
			if err := u.add(e.keys, 0, e.delta); err != nil {
				return err
			}
			if u.open == nil {
				u.open = make(map[uint64]openHold)
			}
			u.open[e.id] = openHold{keys: e.keys, cost: e.delta}
		}
	case opCommit, opRelease:
		h, ok := u.open[e.id]
		if !ok {
			if err := u.add(e.keys, e.delta, 0); err != nil {
				return err
			}
			break
		}
		if !slices.Equal(h.keys, e.keys) {
			return fmt.Errorf("the %s of reservation %d names other keys than its reserve", e.op, e.id)
		}
		actual, ok := addChecked(h.cost, e.delta)
		switch {
		case e.op == opRelease && e.delta != -h.cost:
			return fmt.Errorf("the release of reservation %d drops %d, but it holds %d", e.id, -e.delta, h.cost)
		case !ok:
			return fmt.Errorf("the commit of reservation %d passes %d", e.id, int64(math.MaxInt64))
		case actual < 0:
			return fmt.Errorf("the commit of reservation %d drops %d, but it holds %d", e.id, -e.delta, h.cost)
		}
		if err := u.add(e.keys, actual, -h.cost); err != nil {
			return err
		}
		delete(u.open, e.id)
	}
	if e.at != 0 {
		calls := int64(1)
		if e.op == opTotal {
			calls = e.calls
		}
		for i, k := range e.keys {
			p := u.key(k)
			p.Recorded = true
			p.Calls = addSat(p.Calls, calls)
			if at := time.UnixMilli(e.at).UTC(); !at.Before(p.LastCall) {
				p.LastCall, p.Limit = at, e.limits[i]
			}
		}
	}
	return nil
}

// add adds to the committed spend and the held cost of each of keys, or,
// if any key would fall below zero or pass the largest int64, changes
// nothing and says so.
func (u *usageReader) add(keys []string, committed, held int64) error {
	for _, k := range keys {
		var c, h int64
		if p := u.keys[k]; p != nil {
			c, h = p.Committed, p.Reserved
		}
		c2, ok1 := addChecked(c, committed)
		h2, ok2 := addChecked(h, held)
		_, ok3 := addChecked(c2, h2)
		switch {
		case !ok1 || !ok2 || !ok3:
			return fmt.Errorf("the spend of %q would pass %d", k, int64(math.MaxInt64))
		case c2 < 0:
			return fmt.Errorf("the committed spend of %q would fall below zero", k)
		case h2 < 0:
			return fmt.Errorf("the held cost of %q would fall below zero", k)
		}
	}
	for _, k := range keys {
		p := u.key(k)
		p.Committed += committed
		p.Reserved += held
	}
	return nil
}

func addChecked(a, b int64) (int64, bool) {
	s := a + b
	return s, (b >= 0) == (s >= a)
}

func (u *usageReader) usage() []Usage {
	out := make([]Usage, 0, len(u.keys))
	for _, p := range u.keys {
		if p.Committed != 0 || p.Reserved != 0 || p.Recorded {
			out = append(out, *p)
		}
	}
	slices.SortFunc(out, func(a, b Usage) int { return strings.Compare(a.Key, b.Key) })
	return out
}
