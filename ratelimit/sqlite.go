package ratelimit

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/delegateos/delegateos/internal/sqlitedb"
)

// sqliteSchema is the rate-limit windows' table in the database the spend
// store shares: one row per admission time (Unix nanoseconds) at a key,
// with the time it leaves its window (exp), when it may be dropped.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS rate (
  k TEXT NOT NULL,
  at INTEGER NOT NULL,
  exp INTEGER NOT NULL,
  PRIMARY KEY (k, at)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rate_exp ON rate(exp);
`

// SQLite is a Store kept in a SQLite database (WAL mode) shared by every
// process on the machine that opens the same file: the proxies of one
// policy admit N calls in a window between them, not N each. Each
// Reserve and each Release is one write transaction, which SQLite
// serializes across processes, so two processes can never both take the
// last slot of a key. Times are the machine's wall clock in nanoseconds,
// strictly increasing at each key so that Release finds its own.
type SQLite struct {
	path   string
	db     *sql.DB
	limits map[string]Limit
	closed atomic.Bool
	writes atomic.Int64 // reservations made, for the sweep of old rows
}

var _ Store = (*SQLite)(nil)

// OpenSQLite returns a Store, with the limits named in limits, kept in
// the SQLite database at path (created if there is none), which the
// spend store at the same path shares. busy is how long a transaction
// waits for another process's (sqlitedb.DefaultBusyTimeout when zero).
func OpenSQLite(path string, limits map[string]Limit, busy time.Duration) (*SQLite, error) {
	own, err := ownLimits(limits)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	// Admissions are not synced, as the rate file's lines are not: a
	// process killed loses nothing, a power loss may forget the last.
	db, err := sqlitedb.OpenSync(path, busy, sqliteSchema, false)
	if err != nil {
		return nil, fmt.Errorf("rate-limit store %s: %w", path, err)
	}
	return &SQLite{path: path, db: db, limits: own}, nil
}

// sqlKey names a key's log: the limit's name (its length first, so no
// name and level run together), its rate, and the level. Processes whose
// policies give one name different rates count each rate apart, as in
// Redis.
func sqlKey(k Key, lim Limit) string {
	return strconv.Itoa(len(k.Limit)) + ":" + k.Limit + ":" + strconv.Itoa(lim.N) + "/" + strconv.FormatInt(int64(lim.Per), 10) + ":" + k.Level
}

func (s *SQLite) fail(what string, err error) error {
	return fmt.Errorf("rate-limit store %s: %s: %w", s.path, what, sqlitedb.Explain(err))
}

// Reserve admits a call at every key at time now, or at none, in one
// write transaction; it refuses as Limiter.Reserve does, and with another
// error (never a *LimitedError) when the database cannot be written.
func (s *SQLite) Reserve(keys []Key, now time.Time) (Admission, error) {
	if len(keys) == 0 {
		return Admission{}, nil
	}
	if err := checkKeys(s.limits, keys); err != nil {
		return Admission{}, err
	}
	if s.closed.Load() {
		return Admission{}, errors.New("ratelimit: the limiter is closed")
	}
	type kl struct {
		k   string
		lim Limit
		key Key
	}
	distinct := make([]kl, 0, len(keys))
	for i, k := range keys {
		if !repeated(keys, i) {
			lim := s.limits[k.Limit]
			distinct = append(distinct, kl{sqlKey(k, lim), lim, k})
		}
	}
	tx, err := s.db.Begin()
	if err != nil {
		return Admission{}, s.fail("cannot record the call, so it is refused", err)
	}
	defer tx.Rollback()
	t := now.UnixNano()
	for _, d := range distinct {
		var last sql.NullInt64
		if err := tx.QueryRow(`SELECT max(at) FROM rate WHERE k = ?`, d.k).Scan(&last); err != nil {
			return Admission{}, s.fail("cannot read the windows, so the call is refused", err)
		}
		if last.Valid && last.Int64 >= t {
			t = last.Int64 + 1
		}
	}
	var worst *LimitedError
	for _, d := range distinct {
		var nth int64
		err := tx.QueryRow(`SELECT at FROM rate WHERE k = ? ORDER BY at DESC LIMIT 1 OFFSET ?`, d.k, d.lim.N-1).Scan(&nth)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return Admission{}, s.fail("cannot read the windows, so the call is refused", err)
		}
		if wait := nth + int64(d.lim.Per) - t; wait > 0 && (worst == nil || time.Duration(wait) > worst.RetryAfter) {
			worst = &LimitedError{Key: d.key, Limit: d.lim, RetryAfter: time.Duration(wait)}
		}
	}
	if worst != nil {
		return Admission{}, worst
	}
	for _, d := range distinct {
		if _, err := tx.Exec(`INSERT INTO rate(k, at, exp) VALUES(?, ?, ?)`, d.k, t, t+int64(d.lim.Per)); err != nil {
			return Admission{}, s.fail("cannot record the call, so it is refused", err)
		}
		// What the limit no longer counts: times out of the window, and
		// beyond the last N.
		if _, err := tx.Exec(`DELETE FROM rate WHERE k = ? AND (exp <= ? OR at < (SELECT at FROM rate WHERE k = ? ORDER BY at DESC LIMIT 1 OFFSET ?))`,
			d.k, t, d.k, d.lim.N-1); err != nil {
			return Admission{}, s.fail("cannot record the call, so it is refused", err)
		}
	}
	if s.writes.Add(1)%sweepEvery == 0 {
		// Keys no call has used for a window: their rows decide nothing.
		if _, err := tx.Exec(`DELETE FROM rate WHERE exp <= ?`, t); err != nil {
			return Admission{}, s.fail("cannot record the call, so it is refused", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Admission{}, s.fail("cannot record the call, so it is refused", err)
	}
	return Admission{keys: keys, at: t, released: new(atomic.Bool)}, nil
}

// sweepEvery is how many reservations of a store pass between sweeps of
// the rows that have left their windows.
const sweepEvery = 1024

// Release gives back the slots a holds, in one transaction. Releasing an
// admission again, or its zero value, does nothing. When the database
// cannot be written the slots stay taken until they leave their windows
// (the limits only get stricter); a later Release tries again.
func (s *SQLite) Release(a Admission) error {
	if a.at == 0 || a.released == nil || a.released.Swap(true) {
		return nil
	}
	if s.closed.Load() {
		a.released.Store(false)
		return errors.New("ratelimit: the limiter is closed")
	}
	err := func() error {
		tx, err := s.db.Begin()
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for i, k := range a.keys {
			if repeated(a.keys, i) {
				continue
			}
			if _, err := tx.Exec(`DELETE FROM rate WHERE k = ? AND at = ?`, sqlKey(k, s.limits[k.Limit]), a.at); err != nil {
				return err
			}
		}
		return tx.Commit()
	}()
	if err != nil {
		a.released.Store(false)
		return s.fail("cannot record a release (the call keeps its slot until it leaves the window)", err)
	}
	return nil
}

// Import adds the windows of a rate-limit file of an earlier version (the
// file next to a spend log) to the database, and renames the file to
// path + ".migrated", so that a proxy moved to the shared store does not
// start its windows afresh. A file that does not exist imports nothing;
// one that users other than its owner may write is refused.
func (s *SQLite) Import(path string, now time.Time) (int, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		// Others could have emptied it (every window afresh) or filled it.
		return 0, fmt.Errorf("rate-limit file %s may be written by other users (mode %s): it is not imported", path, fi.Mode().Perm())
	}
	l, err := OpenFile(path, s.limits, now)
	if err != nil {
		return 0, err
	}
	// Held (locked) until it is renamed; its Close rewrites it, so it
	// closes before the rename.
	closed := false
	defer func() {
		if !closed {
			l.Close()
		}
	}()
	tx, err := s.db.Begin()
	if err != nil {
		return 0, s.fail("cannot import "+path, err)
	}
	defer tx.Rollback()
	n := 0
	l.mu.Lock()
	for k, w := range l.windows {
		lim := s.limits[k.Limit]
		for _, at := range w.times {
			if _, err := tx.Exec(`INSERT OR IGNORE INTO rate(k, at, exp) VALUES(?, ?, ?)`, sqlKey(k, lim), at, at+int64(lim.Per)); err != nil {
				l.mu.Unlock()
				return 0, s.fail("cannot import "+path, err)
			}
			n++
		}
	}
	l.mu.Unlock()
	if err := tx.Commit(); err != nil {
		return 0, s.fail("cannot import "+path, err)
	}
	closed = true
	l.Close()
	if err := os.Rename(path, path+".migrated"); err != nil {
		return n, fmt.Errorf("rate-limit file %s was imported but cannot be renamed: %w", path, err)
	}
	return n, nil
}

// Close closes the database; the windows stay in it. A closed store
// refuses every call. Closing twice does nothing.
func (s *SQLite) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.db.Close()
}
