package budget

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/sqlitedb"
)

// sqliteSchema is the spend store's tables. spend holds, per key, the
// committed and held cost and the record of its calls; reservation the
// open reservations, each with the store (owner) that made it, so that
// the reservations of a process that died are settled by the next store
// opened on the database.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS spend (
  key TEXT PRIMARY KEY NOT NULL,
  committed INTEGER NOT NULL DEFAULT 0,
  held INTEGER NOT NULL DEFAULT 0,
  calls INTEGER NOT NULL DEFAULT 0,
  last INTEGER NOT NULL DEFAULT 0,
  lim INTEGER NOT NULL DEFAULT 0,
  recorded INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS reservation (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  owner TEXT NOT NULL,
  cost INTEGER NOT NULL,
  keys TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reservation_owner ON reservation(owner);
`

// The statements of Reserve, Commit and Release, prepared once when the
// store is opened: parsing them at every call would cost more than the
// rest of the transaction.
const (
	qSpent   = `SELECT committed, held FROM spend WHERE key = ?`
	qDelRes  = `DELETE FROM reservation WHERE id = ?`
	qSetEnd  = `INSERT INTO spend(key, committed, held) VALUES(?, ?, ?) ON CONFLICT(key) DO UPDATE SET committed = excluded.committed, held = excluded.held`
	qHold    = `INSERT INTO spend(key, committed, held, calls, last, lim, recorded) VALUES(?, 0, ?, 1, ?, ?, 1) ON CONFLICT(key) DO UPDATE SET held = held + excluded.held, calls = min(calls + 1, 9223372036854775807), lim = CASE WHEN excluded.last >= last THEN excluded.lim ELSE lim END, last = max(last, excluded.last), recorded = 1`
	qAddRes  = `INSERT INTO reservation(owner, cost, keys) VALUES(?, ?, ?)`
	qOwnerRs = `SELECT id, cost, keys FROM reservation WHERE owner = ?`
	// qSpentOf reads the spend of a JSON list of keys in one statement,
	// so in one snapshot.
	qSpentOf = `SELECT key, committed, held FROM spend WHERE key IN (SELECT value FROM json_each(?))`
)

var sqliteQueries = []string{qSpent, qDelRes, qSetEnd, qHold, qAddRes, qOwnerRs, qSpentOf}

// SQLite is a Store kept in a SQLite database (WAL mode) that every
// process on the machine opening the same file shares: the embedded
// default. Each Reserve, Commit and Release is one write transaction,
// which SQLite serializes across processes, so reservations from any
// number of proxies never together pass a limit. See the package
// documentation.
type SQLite struct {
	path  string
	db    *sql.DB
	owner string // this store's ID among the database's openers
	// unlock lets go of the owner's lock file: while it is held, other
	// stores know this one is alive and leave its reservations open.
	unlock    func()
	ownerLock string

	stmts map[string]*sql.Stmt // sqliteQueries, prepared

	ops     chan *sqlOp    // to the writer
	written chan struct{}  // closed when the writer has stopped
	sending sync.WaitGroup // sends under way, waited for before ops is closed

	mu     sync.Mutex // guards l, last, closed
	l      ledger     // open reservations only, for ending them once
	free   uint64     // free reservations made, for their IDs
	last   map[string]int64
	closed bool
	now    func() time.Time
}

var _ Store = (*SQLite)(nil)

// SQLiteOptions tunes OpenSQLite.
type SQLiteOptions struct {
	// BusyTimeout is how long a transaction waits for another process's
	// write lock; sqlitedb.DefaultBusyTimeout when zero.
	BusyTimeout time.Duration
}

// OpenSQLite opens the spend store in the SQLite database at path,
// creating it if it does not exist. Any number of stores, in any number
// of processes, may have it open. The reservations of stores whose
// process has died are settled at their reserved cost (they count as
// spent, as they did already).
func OpenSQLite(path string, opts SQLiteOptions) (*SQLite, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	db, err := sqlitedb.Open(path, opts.BusyTimeout, sqliteSchema)
	if err != nil {
		return nil, fmt.Errorf("spend store %s: %w", path, err)
	}
	var b [12]byte
	rand.Read(b[:])
	s := &SQLite{path: path, db: db, owner: hex.EncodeToString(b[:]), now: time.Now, stmts: map[string]*sql.Stmt{}}
	for _, q := range sqliteQueries {
		st, err := db.Prepare(q)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("spend store %s: %w", path, sqlitedb.Explain(err))
		}
		s.stmts[q] = st
	}
	dir := ownersDir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		db.Close()
		return nil, fmt.Errorf("spend store %s: %w", path, err)
	}
	s.ownerLock = filepath.Join(dir, s.owner+".lock")
	if s.unlock, err = fsutil.TryLock(s.ownerLock, fileMode); err != nil {
		db.Close()
		return nil, fmt.Errorf("spend store %s: %w", path, err)
	}
	if err := s.settleDead(); err != nil {
		s.unlock()
		os.Remove(s.ownerLock)
		db.Close()
		return nil, fmt.Errorf("spend store %s: %w", path, err)
	}
	s.ops, s.written = make(chan *sqlOp, maxBatch), make(chan struct{})
	go s.write()
	return s, nil
}

// ownersDir holds one lock file per open store of the database at path.
func ownersDir(path string) string { return path + ".owners" }

// settleDead settles the reservations of every owner whose lock is not
// held: its process has died (or closed without settling).
func (s *SQLite) settleDead() error {
	rows, err := s.db.Query(`SELECT DISTINCT owner FROM reservation WHERE owner != ?`, s.owner)
	if err != nil {
		return sqlitedb.Explain(err)
	}
	var owners []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			rows.Close()
			return err
		}
		owners = append(owners, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, o := range owners {
		if !validOwner(o) {
			continue
		}
		lock := filepath.Join(ownersDir(s.path), o+".lock")
		unlock, err := fsutil.TryLock(lock, fileMode)
		if errors.Is(err, fsutil.ErrLocked) {
			continue // alive
		}
		if err != nil {
			return err
		}
		err = s.settleOwner(o)
		os.Remove(lock)
		unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// validOwner: an owner is 24 hex digits, so it names a file in the
// owners directory and nothing else.
func validOwner(o string) bool {
	if len(o) != 24 {
		return false
	}
	_, err := hex.DecodeString(o)
	return err == nil
}

// settleOwner commits every open reservation of owner at its reserved
// cost, in one transaction.
func (s *SQLite) settleOwner(owner string) error {
	tx, err := s.db.Begin()
	if err != nil {
		return sqlitedb.Explain(err)
	}
	defer tx.Rollback()
	rows, err := tx.Stmt(s.stmts[qOwnerRs]).Query(owner)
	if err != nil {
		return sqlitedb.Explain(err)
	}
	type res struct {
		id   int64
		cost int64
		keys []string
	}
	var rs []res
	for rows.Next() {
		var r res
		var keys string
		if err := rows.Scan(&r.id, &r.cost, &keys); err != nil {
			rows.Close()
			return err
		}
		if err := json.Unmarshal([]byte(keys), &r.keys); err != nil {
			rows.Close()
			return fmt.Errorf("reservation %d holds keys %q, not a list delegateos writes", r.id, keys)
		}
		rs = append(rs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range rs {
		if err := s.endRow(tx, r.id, r.keys, r.cost, r.cost); err != nil {
			return err
		}
	}
	return sqlitedb.Explain(tx.Commit())
}

// endRow ends reservation id (keys, cost) at actual: its held cost leaves
// every key and actual is committed. A reservation no longer in the
// table was settled at its cost already (by a store that found its owner
// dead), or a free reservation, which has no row (id 0): then only actual
// − cost is committed.
func (s *SQLite) endRow(tx *sql.Tx, id int64, keys []string, cost, actual int64) error {
	var n int64
	if id > 0 {
		res, err := tx.Stmt(s.stmts[qDelRes]).Exec(id)
		if err != nil {
			return sqlitedb.Explain(err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
	}
	held, add := cost, actual
	if n == 0 {
		held, add = 0, actual-cost
	}
	get, set := tx.Stmt(s.stmts[qSpent]), tx.Stmt(s.stmts[qSetEnd])
	for _, k := range keys {
		var c, h int64
		err := get.QueryRow(k).Scan(&c, &h)
		if errors.Is(err, sql.ErrNoRows) {
			c, h = 0, 0
		} else if err != nil {
			return sqlitedb.Explain(err)
		}
		c, h = addSat(c, add), max(h-held, 0)
		if _, err := set.Exec(k, c, h); err != nil {
			return sqlitedb.Explain(err)
		}
	}
	return nil
}

// sqlOp is one Reserve (levels set) or the end of a reservation, run by
// the store's writer in a transaction with whatever other operations of
// the process are waiting: one transaction, and at most one fsync, for a
// burst of calls (group commit).
type sqlOp struct {
	levels []Level
	keys   []string
	limits []int64
	record bool // a free call's record: calls and last call at keys, nothing held
	cost   int64
	at     int64
	id     int64 // the reservation's row: set by a Reserve, given to an end
	actual int64
	full   bool          // the transaction must be synced
	done   chan struct{} // closed when the op has run; nil for a settle nobody waits for
	err    error
	failed bool // err is the transaction's failure, not the op's refusal
}

// maxBatch bounds the operations of one transaction.
const maxBatch = 256

// lingerFor is how long the writer waits for more when it holds only
// writes nobody waits for. A process killed meanwhile loses them: the
// records of free calls (their calls and last call), and commits at the
// reserved cost, which the next store settles at that same cost.
const lingerFor = 2 * time.Millisecond

// write runs the operations the process sends, a batch per transaction,
// until ops is closed.
func (s *SQLite) write() {
	defer close(s.written)
	var linger *time.Timer
	for op := range s.ops {
		batch := []*sqlOp{op}
		waited := op.done != nil
	more:
		for len(batch) < maxBatch {
			select {
			case o, ok := <-s.ops:
				if !ok {
					break more
				}
				batch = append(batch, o)
				waited = waited || o.done != nil
				continue
			default:
			}
			if waited {
				break
			}
			// Only writes nobody waits for (free calls' records, commits at
			// the reserved cost): gather what comes within a moment, so
			// that a stream of calls is one transaction, not one each.
			if linger == nil {
				linger = time.NewTimer(lingerFor)
			} else {
				linger.Reset(lingerFor)
			}
			select {
			case o, ok := <-s.ops:
				linger.Stop()
				if !ok {
					break more
				}
				batch = append(batch, o)
				waited = waited || o.done != nil
			case <-linger.C:
				break more
			}
		}
		s.runBatch(batch)
	}
}

// runBatch runs batch in one transaction, synced if any op needs it. A
// Reserve that a level refuses gets its *ExceededError and changes
// nothing; if the transaction fails, every op of the batch gets its
// error (and a Reserve holds nothing).
func (s *SQLite) runBatch(batch []*sqlOp) {
	full := false
	for _, o := range batch {
		full = full || o.full
	}
	err := func() error {
		tx, done, err := sqlitedb.Begin(s.db, full)
		if err != nil {
			return err
		}
		defer done()
		defer tx.Rollback()
		get, hold, add := tx.Stmt(s.stmts[qSpent]), tx.Stmt(s.stmts[qHold]), tx.Stmt(s.stmts[qAddRes])
		for _, o := range batch {
			if o.record {
				for i, k := range o.keys {
					if _, err := hold.Exec(k, 0, o.at, o.limits[i]); err != nil {
						return err
					}
				}
				continue
			}
			if o.levels == nil {
				if err := s.endRow(tx, o.id, o.keys, o.cost, o.actual); err != nil {
					return err
				}
				continue
			}
			if err := s.reserveRow(get, hold, add, o); err != nil {
				return err
			}
		}
		return tx.Commit()
	}()
	for _, o := range batch {
		if err != nil {
			o.err, o.failed, o.id = err, true, 0
		}
		if o.done != nil {
			close(o.done)
		}
	}
}

// reserveRow checks o's levels and holds its cost, within a transaction:
// a refusal is o.err; an error returned is the transaction's.
func (s *SQLite) reserveRow(get, hold, add *sql.Stmt, o *sqlOp) error {
	var spent [MaxLevels][2]int64
	for i, k := range o.keys {
		var c, h int64
		err := get.QueryRow(k).Scan(&c, &h)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		spent[i] = [2]int64{c, h}
	}
	for _, lv := range o.levels {
		v := spent[indexOf(o.keys, lv.Key)]
		sp := addSat(v[0], v[1])
		if sp >= lv.Limit || o.cost > lv.Limit-sp {
			o.err = &ExceededError{Key: lv.Key, Limit: lv.Limit, Spent: sp, Cost: o.cost}
			return nil
		}
	}
	for i, k := range o.keys {
		if _, err := hold.Exec(k, o.cost, o.at, o.limits[i]); err != nil {
			return err
		}
	}
	kj, _ := json.Marshal(o.keys)
	res, err := add.Exec(s.owner, o.cost, string(kj))
	if err != nil {
		return err
	}
	o.id, err = res.LastInsertId()
	return err
}

// send hands op to the writer; false if the store is closed.
func (s *SQLite) send(op *sqlOp) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.sending.Add(1)
	s.mu.Unlock()
	s.ops <- op
	s.sending.Done()
	return true
}

// Reserve implements Store: every level is read and checked, the cost
// held at each key and the reservation recorded, in one write
// transaction (shared with the process's other waiting operations), or
// nothing changes. A transaction that cannot run (the database locked
// past the busy timeout, a full disk, a damaged file) refuses the call
// with an error that does not match ErrExceeded. A reservation with a
// cost is synced before Reserve returns, so that even a power loss never
// forgets spend; a free one is not (as a File does not sync it).
func (s *SQLite) Reserve(levels []Level, cost int64) (*Reservation, error) {
	keys, err := checkReserve(levels, cost)
	if err != nil {
		return nil, err
	}
	limits := keyLimits(make([]int64, len(keys)), levels, keys)
	at := min(max(s.now().UnixMilli(), 1), maxAt)
	if cost == 0 {
		return s.reserveFree(levels, keys, limits, at)
	}
	op := &sqlOp{levels: levels, keys: keys, limits: limits, cost: cost, at: at, full: true, done: make(chan struct{})}
	if !s.send(op) {
		return nil, s.errClosed()
	}
	<-op.done
	if op.failed {
		return nil, s.fail("cannot record the reservation, so the call is refused", op.err)
	}
	if op.err != nil {
		return nil, op.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &Reservation{owner: &s.l, id: uint64(op.id), keys: keys, cost: cost}
	if s.l.open == nil {
		s.l.open = make(map[uint64]*Reservation)
	}
	s.l.open[r.id] = r
	return r, nil
}

// reserveFree is Reserve of no cost: it holds nothing, so it needs no
// write, only the levels' spend read in one snapshot (a level at or over
// its limit refuses even a free call). Its record of the call is handed
// to the writer without waiting, as a File does not sync it; its
// reservation has no row (id 0 in the database), and ending it at no cost
// writes nothing.
func (s *SQLite) reserveFree(levels []Level, keys []string, limits []int64, at int64) (*Reservation, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, s.errClosed()
	}
	s.mu.Unlock()
	kj, _ := json.Marshal(keys)
	rows, err := s.stmts[qSpentOf].Query(string(kj))
	if err != nil {
		return nil, s.fail("cannot read the spend, so the call is refused", err)
	}
	spent := make(map[string]int64, len(keys))
	for rows.Next() {
		var k string
		var c, h int64
		if err := rows.Scan(&k, &c, &h); err != nil {
			rows.Close()
			return nil, s.fail("cannot read the spend, so the call is refused", err)
		}
		spent[k] = addSat(c, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.fail("cannot read the spend, so the call is refused", err)
	}
	for _, lv := range levels {
		if sp := spent[lv.Key]; sp >= lv.Limit {
			return nil, &ExceededError{Key: lv.Key, Limit: lv.Limit, Spent: sp, Cost: 0}
		}
	}
	if !s.send(&sqlOp{record: true, keys: keys, limits: limits, at: at}) {
		return nil, s.errClosed()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free++
	r := &Reservation{owner: &s.l, id: freeID | s.free, keys: keys}
	if s.l.open == nil {
		s.l.open = make(map[uint64]*Reservation)
	}
	s.l.open[r.id] = r
	return r, nil
}

// freeID marks the IDs of free reservations, which have no row: row IDs
// are below it.
const freeID = 1 << 63

// fail names the store and what could not be done.
func (s *SQLite) fail(what string, err error) error {
	return fmt.Errorf("spend store %s: %s: %w%s", s.path, what, sqlitedb.Explain(err), hint(err))
}

// Commit implements Store. A commit at the reserved cost changes no
// spend (the held cost becomes committed), so it does not wait: it rides
// in the process's next transaction, or is settled when the store
// closes, or, if the process dies first, by the next store opened, at
// that same cost. Any other commit is one synced transaction; if it
// fails, the reservation's cost stays held (counted as spent) and is
// settled at that cost when the store closes.
func (s *SQLite) Commit(r *Reservation, actual int64) error {
	if err := checkActual(actual); err != nil {
		return err
	}
	return s.end(r, actual, "commit")
}

// Release implements Store: the held cost is dropped, in one synced
// transaction (a free reservation's release waits for nothing).
func (s *SQLite) Release(r *Reservation) error {
	return s.end(r, 0, "release")
}

func (s *SQLite) end(r *Reservation, actual int64, what string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.errClosed()
	}
	if err := s.l.end(r); err != nil {
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	id := int64(r.id)
	if r.id&freeID != 0 {
		id = 0 // no row
	}
	op := &sqlOp{id: id, keys: r.keys, cost: r.cost, actual: actual, full: actual != r.cost}
	if actual == r.cost && id == 0 {
		return nil // a free call ended at no cost: nothing to write
	}
	if actual == r.cost {
		if !s.send(op) {
			return s.errClosed()
		}
		return nil
	}
	op.done = make(chan struct{})
	if !s.send(op) {
		return s.errClosed()
	}
	<-op.done
	if op.err != nil {
		return s.fail("cannot record the "+what+" (the reservation's cost stays held, counted as spent)", op.err)
	}
	return nil
}

// Spent implements Store with one read. When the database cannot be read
// it returns the last spend this store read for the key (0 if none):
// callers that decide use Reserve, which refuses.
func (s *SQLite) Spent(key string) int64 {
	var c, h int64
	err := s.stmts[qSpent].QueryRow(key).Scan(&c, &h)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil || errors.Is(err, sql.ErrNoRows) {
		if s.last == nil {
			s.last = make(map[string]int64)
		}
		s.last[key] = addSat(c, h)
		return s.last[key]
	}
	return s.last[key]
}

// Close settles this store's open reservations at their reserved cost
// (they count as spent from then on, as a File's do), closes the
// database and lets the owner's lock go. Closing twice does nothing.
func (s *SQLite) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	// What the writer has been given (commits at the reserved cost among
	// it) is run before the rest is settled.
	s.sending.Wait()
	close(s.ops)
	<-s.written
	err := s.settleOwner(s.owner)
	if err == nil {
		os.Remove(s.ownerLock)
	}
	s.unlock()
	for _, st := range s.stmts {
		st.Close()
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spend store %s: %w", s.path, err)
	}
	return nil
}

func (s *SQLite) errClosed() error {
	return fmt.Errorf("spend store %s is closed", s.path)
}

// readSQLiteUsage reads what the database at path records of each key,
// in key order.
func readSQLiteUsage(path string) ([]Usage, error) {
	db, err := sqlitedb.Open(path, 0, sqliteSchema)
	if err != nil {
		return nil, fmt.Errorf("spend store %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT key, committed, held, calls, last, lim, recorded FROM spend ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("spend store %s: %w", path, sqlitedb.Explain(err))
	}
	defer rows.Close()
	var us []Usage
	for rows.Next() {
		var u Usage
		var last int64
		var recorded bool
		if err := rows.Scan(&u.Key, &u.Committed, &u.Reserved, &u.Calls, &last, &u.Limit, &recorded); err != nil {
			return nil, fmt.Errorf("spend store %s: %w", path, err)
		}
		if u.Committed == 0 && u.Reserved == 0 && !recorded {
			continue
		}
		u.Recorded = recorded
		if recorded {
			u.LastCall = time.UnixMilli(last).UTC()
		} else {
			u.Calls, u.Limit = 0, 0
		}
		us = append(us, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("spend store %s: %w", path, err)
	}
	return us, nil
}

// writeSQLiteUsage writes usage into a new database at path, in one
// transaction: every key's spend committed (what was held counts as
// spent), and its record of calls.
func writeSQLiteUsage(path string, us []Usage) error {
	db, err := sqlitedb.Open(path, 0, sqliteSchema)
	if err != nil {
		return fmt.Errorf("spend store %s: %w", path, err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("spend store %s: %w", path, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM spend`).Scan(&n); err != nil {
		return fmt.Errorf("spend store %s: %w", path, err)
	}
	if n > 0 {
		return fmt.Errorf("spend store %s already holds spend: migrate to an empty store", path)
	}
	for _, u := range us {
		if err := checkKey(u.Key); err != nil {
			return err
		}
		var last, lim int64
		if u.Recorded {
			last, lim = min(max(u.LastCall.UnixMilli(), 1), maxAt), u.Limit
		}
		if _, err := tx.Exec(`INSERT INTO spend(key, committed, held, calls, last, lim, recorded) VALUES(?, ?, 0, ?, ?, ?, ?)`,
			u.Key, addSat(u.Committed, u.Reserved), u.Calls, last, lim, u.Recorded); err != nil {
			return fmt.Errorf("spend store %s: %w", path, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("spend store %s: %w", path, err)
	}
	return nil
}

// isSQLitePath reports whether the spend store at path is (or, not
// existing yet or empty, will be) a SQLite database rather than a spend
// log of the File format.
func isSQLitePath(path string) (bool, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if fi.Mode().IsRegular() && fi.Size() == 0 {
		return true, nil
	}
	if !fi.Mode().IsRegular() {
		return false, nil // OpenFile says what is wrong with it
	}
	return sqlitedb.IsDB(path)
}

// legacyWarning is what a proxy says when it opens a spend log of the
// File format, which one process only can hold.
func legacyWarning(path string) string {
	return fmt.Sprintf("the spend store %s is a spend log of an earlier version, which only one process at a time can open: a second proxy on this policy cannot start; migrate it to the shared store with 'delegateos store migrate --from %s --to %s' (stop the proxy first)", path, path, path)
}
