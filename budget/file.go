package budget

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/jsonlines"
)

// fileMode is the mode of a new spend log and its lock file: spend is the
// proxy's own state, read by nobody else.
const fileMode fs.FileMode = 0o600

// ErrInUse is matched (errors.Is) by the error of OpenFile when another
// open File, in this process or another, holds the store.
var ErrInUse = errors.New("spend store in use")

type inUseError struct{ path string }

func (e *inUseError) Error() string {
	return fmt.Sprintf("spend store %s is in use by another delegateos process (its lock %s.lock is held); stop that process or give this one its own store", e.path, e.path)
}

func (e *inUseError) Is(target error) bool { return target == ErrInUse }

// File is a Store kept in an append-only log file, so that spend survives
// a restart and a crash never under-counts it. See the package
// documentation for the format and the guarantees. Only one File at a time
// may have a store open.
type File struct {
	path   string
	mode   fs.FileMode
	unlock func()

	mu  sync.Mutex // guards everything below; file writes happen under it
	l   ledger
	log *os.File // the log, open for appending; nil if reopening it failed
	// dirty, when not nil, says why the log may not hold what l holds (an
	// append or a rewrite failed). The log is then rewritten from l before
	// anything is appended to it again, and Reserve refuses until that works.
	dirty        error
	lines        int // lines appended since the last rewrite
	compactAfter int // lines before a rewrite; compactLines unless a test says otherwise
	closed       bool
	buf          []byte
	now          func() time.Time     // the clock of the calls' times; time.Now unless a test says otherwise
	syncLog      func(*os.File) error // (*os.File).Sync unless a test says otherwise
	warnings     []string             // what Open found to say at start
}

// Warnings returns what a person should know about the store, to be
// logged at start.
func (f *File) Warnings() []string { return f.warnings }

var _ Store = (*File)(nil)

// OpenFile opens the spend store at path, creating it if it does not
// exist, and holds it until Close: a second OpenFile of the same store,
// from any process, fails with an error matching ErrInUse. The store is
// read, and rewritten compactly (dropping a line torn by a crash).
func OpenFile(path string) (*File, error) {
	// Every name of the store shares one lock, and the rewrite replaces the
	// file rather than a symbolic link to it. The path is made absolute so
	// that a later change of directory does not move the store.
	path, unlock, err := jsonlines.Lock(path, fileMode)
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, &inUseError{path}
	}
	if err != nil {
		return nil, fmt.Errorf("spend store %s: lock: %w", path, err)
	}
	f := &File{path: path, mode: fileMode, unlock: unlock, compactAfter: compactLines, now: time.Now, syncLog: (*os.File).Sync}
	if err := f.load(); err != nil {
		unlock()
		return nil, err
	}
	return f, nil
}

// load replays the log into the ledger and rewrites it.
func (f *File) load() error {
	// An existing log's mode is kept by its rewrites.
	data, mode, err := jsonlines.ReadFile("spend store", f.path, f.mode)
	if err != nil {
		return err
	}
	f.mode = mode
	if _, err := parseLog(data, f.l.replay); err != nil {
		return fmt.Errorf("spend store %s is corrupt at %w; it was not changed: restore it from a backup, or repair the line knowing that dropping spend lets it be spent again", f.path, err)
	}
	if err := f.compact(); err != nil {
		return fmt.Errorf("spend store %s: rewrite: %w", f.path, err)
	}
	return nil
}

// Reserve implements Store. A reservation is written to the log with the
// time of the call and each level's limit. One with a cost is synced
// before Reserve returns, so that a crash after the call was forwarded
// still counts it; one of no cost is not synced, so that a free call never
// waits for the disk, and is kept in memory only if the log cannot be
// written (its record then reaches the log with the next rewrite).
func (f *File) Reserve(levels []Level, cost int64) (*Reservation, error) {
	keys, err := checkReserve(levels, cost)
	if err != nil {
		return nil, err
	}
	var buf [MaxLevels]int64
	limits := keyLimits(buf[:len(keys)], levels, keys)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, f.errClosed()
	}
	if err := f.l.admit(levels, cost); err != nil {
		return nil, err
	}
	at := min(max(f.now().UnixMilli(), 1), maxAt)
	// The call is in the ledger before it is written, so that a rewrite
	// the write makes holds it.
	var prev [MaxLevels]callRecord
	for i, k := range keys {
		prev[i] = f.l.calls[k]
	}
	r := f.l.hold(keys, cost)
	f.l.record(keys, limits, 1, at)
	e := entry{op: opReserve, id: r.id, delta: cost, keys: keys, limits: limits, at: at}
	if cost == 0 {
		if f.dirty == nil {
			f.write(e, false) // a failure sets dirty
		}
		return r, nil
	}
	if err := f.write(e, true); err != nil {
		f.l.unhold(r)
		f.l.unrecord(keys, prev[:len(keys)])
		return nil, fmt.Errorf("spend store %s: cannot record the reservation, so the call is refused: %w%s", f.path, err, hint(err))
	}
	return r, nil
}

// keyLimits sets limits (parallel to keys, the distinct keys of levels)
// to the limit of each key, the least of a key given twice, which is the
// one that binds, and returns it.
func keyLimits(limits []int64, levels []Level, keys []string) []int64 {
	for i, k := range keys {
		limits[i] = -1
		for _, l := range levels {
			if l.Key == k && (limits[i] < 0 || l.Limit < limits[i]) {
				limits[i] = l.Limit
			}
		}
	}
	return limits
}

// Commit implements Store. It writes actual − reserved to the log, and
// syncs it only when they differ: the reserve line already counts the
// reserved cost, so a crash that loses a commit of it loses no spend. It
// writes nothing for a reservation of no cost committed at no cost. If a
// write that changes spend fails, the commit still takes effect in this
// process and the error says so; the log is rewritten before the next
// reservation is allowed.
func (f *File) Commit(r *Reservation, actual int64) error {
	if err := checkActual(actual); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return f.errClosed()
	}
	if err := f.l.end(r); err != nil {
		return err
	}
	delta := actual - r.cost
	if delta == 0 {
		// Only the end of the reservation: the log holds its spend already.
		if r.cost != 0 && f.dirty == nil {
			f.write(entry{op: opCommit, id: r.id, delta: 0, keys: r.keys}, false) // a failure sets dirty
		}
		return nil
	}
	f.l.add(r.keys, delta)
	if err := f.write(entry{op: opCommit, id: r.id, delta: delta, keys: r.keys}, true); err != nil {
		return fmt.Errorf("spend store %s: cannot record the commit (it counts in this process, and the file is rewritten before the next reservation): %w%s", f.path, err, hint(err))
	}
	return nil
}

// Release implements Store. If the write to the log fails, the release
// still takes effect in this process; the log keeps counting the held
// cost, which over-counts, until it is rewritten.
func (f *File) Release(r *Reservation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return f.errClosed()
	}
	if err := f.l.end(r); err != nil {
		return err
	}
	if r.cost == 0 {
		return nil
	}
	f.l.add(r.keys, -r.cost)
	if err := f.write(entry{op: opRelease, id: r.id, delta: -r.cost, keys: r.keys}, true); err != nil {
		return fmt.Errorf("spend store %s: cannot record the release (it counts in this process; the file over-counts until it is rewritten): %w%s", f.path, err, hint(err))
	}
	return nil
}

// Spent implements Store. After Close it returns the spend as it was.
func (f *File) Spent(key string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.l.spent[key]
}

// Close rewrites the log if an earlier write failed, closes it and
// releases the store for another OpenFile. Reservations still open count
// as spent from then on. Closing twice does nothing.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	var err error
	if f.dirty != nil {
		if err = f.compact(); err != nil {
			err = fmt.Errorf("spend store %s: rewrite: %w%s", f.path, err, hint(err))
		}
	}
	if f.log != nil {
		if cerr := f.log.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("spend store %s: %w", f.path, cerr)
		}
		f.log = nil
	}
	f.unlock()
	return err
}

func (f *File) errClosed() error {
	return fmt.Errorf("spend store %s is closed", f.path)
}

// write makes the log hold the ledger after e has been applied to it: by
// appending e, and syncing if sync is set, or, if an earlier write failed,
// by rewriting the log from the ledger.
func (f *File) write(e entry, sync bool) error {
	if f.dirty != nil {
		return f.compact()
	}
	f.buf = appendEntry(f.buf[:0], e)
	if err := f.append(f.buf, sync); err != nil {
		// Part of the line may be in the file; nothing is appended after it.
		f.dirty = err
		return err
	}
	f.lines++
	if f.lines >= max(f.compactAfter, len(f.l.spent), len(f.l.calls)) {
		// The line is durable whatever this does; a failure sets dirty.
		f.compact()
	}
	return nil
}

func (f *File) append(line []byte, sync bool) error {
	if _, err := f.log.Write(line); err != nil || !sync {
		return err
	}
	return f.syncLog(f.log)
}

// compact rewrites the log as one total per key and a reserve per open
// reservation (temporary file, fsync, rename, fsync of the directory) and
// reopens it for appending. A crash after a rewrite counts the open
// reservations as spent. Any failure leaves the store dirty: if the rename
// happened but the directory sync did not, a crash could bring back the
// old log, so nothing may be appended to the new one yet.
func (f *File) compact() error {
	log, err := jsonlines.Rewrite(f.log, f.path, f.l.appendTotals(nil), f.mode)
	f.log = log
	if err != nil {
		f.dirty = err
		return err
	}
	f.dirty = nil
	f.lines = 0
	return nil
}

// hint adds what a person can do about an error writing the store.
func hint(err error) string {
	if isNoSpace(err) {
		return " (the disk is full: free space; calls that cost anything are refused until the store can be written)"
	}
	return ""
}
