// Package sqlitedb opens the SQLite database that the proxies of one
// machine share for their spend and rate-limit windows: the embedded
// default store, which every process that opens the same file shares.
//
// The database is opened through modernc.org/sqlite, a translation of
// SQLite to Go (no cgo, so the binary stays static and cross-compiles),
// in WAL mode, by default with synchronous=FULL: a transaction that
// returned is on disk (see OpenSync for the lighter NORMAL), readers never
// wait for the writer, and writers from every process
// take the database's write lock in turn (BEGIN IMMEDIATE), waiting up to
// the busy timeout for it. A process killed in the middle of a write
// transaction leaves nothing of it: the next opener rolls it back.
package sqlitedb

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite"

	"github.com/delegateos/delegateos/internal/fsutil" // the "sqlite" driver
)

// Header is how every SQLite database file begins.
const Header = "SQLite format 3\x00"

// DefaultBusyTimeout is how long a write waits for another process's
// write transaction before it fails (and the call is refused as
// store_unavailable): far longer than any transaction the stores run.
const DefaultBusyTimeout = 5 * time.Second

// IsDB reports whether the file at path is a SQLite database: it exists
// and begins with the SQLite header. A file that does not exist, or is
// empty, is not one (but may become one).
func IsDB(path string) (bool, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false, err
	}
	var b [len(Header)]byte
	n, err := io.ReadFull(f, b[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, err
	}
	return n == len(Header) && bytes.Equal(b[:], []byte(Header)), nil
}

// Open opens (creating it, mode 0600) the database at path in WAL mode,
// with two connections (a writer and a reader): writes of other
// processes take turns through the database's lock, waiting up to busy. schema is run in one transaction, so it must be idempotent
// (CREATE ... IF NOT EXISTS). The database is checked (quick_check) so a
// corrupt file is refused at once rather than at a call.
func Open(path string, busy time.Duration, schema string) (*sql.DB, error) {
	return OpenSync(path, busy, schema, true)
}

// OpenSync is Open with the connection's synchronous setting: FULL when
// full is set (every commit is on disk when it returns, power loss
// included), else NORMAL (a commit survives the process being killed but
// may be lost with the machine's power; a later FULL commit, from this
// connection or another, syncs it). A store may switch a transaction to
// the other with SetSync.
func OpenSync(path string, busy time.Duration, schema string, full bool) (*sql.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	// A new database is created with mode 0600: the proxies' own state.
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", abs)
	}
	dsn := "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + url.Values{
		"_pragma": {
			fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()),
			"journal_mode(WAL)",
			syncPragma(full),
			"foreign_keys(ON)",
		},
		"_txlock": {"immediate"},
	}.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	// Two connections: a store's writer, and reads, which in WAL mode
	// never wait for a writer.
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	db.SetConnMaxLifetime(0)
	if err := setUp(db, schema); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func setUp(db *sql.DB, schema string) error {
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		return explain(err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("the database is in journal mode %q, not WAL: it cannot be shared safely", mode)
	}
	var check string
	if err := db.QueryRow("PRAGMA quick_check").Scan(&check); err != nil {
		return explain(err)
	}
	if check != "ok" {
		return fmt.Errorf("the database is corrupt (quick_check: %s)", check)
	}
	tx, err := db.Begin()
	if err != nil {
		return explain(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(schema); err != nil {
		return explain(err)
	}
	return explain(tx.Commit())
}

// explain adds what a person can do to the errors SQLite reports in
// words of its own.
func explain(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked"):
		return fmt.Errorf("%w (another process held the database's write lock past the busy timeout)", err)
	case strings.Contains(msg, "not a database") || strings.Contains(msg, "malformed"):
		return fmt.Errorf("%w (the file is damaged: restore it from a backup, or move it away to start afresh)", err)
	case strings.Contains(msg, "readonly") || strings.Contains(msg, "unable to open"):
		return fmt.Errorf("%w (the database, its directory, its -wal and -shm files must be writable by the proxy's user)", err)
	}
	return err
}

func syncPragma(full bool) string {
	if full {
		return "synchronous(FULL)"
	}
	return "synchronous(NORMAL)"
}

// Begin begins a write transaction (BEGIN IMMEDIATE) whose commit is
// synced as full says (see OpenSync), on a connection of db held until
// done is called, after the transaction's Commit or Rollback. SQLite
// changes the setting only between transactions, so it is set first.
func Begin(db *sql.DB, full bool) (tx *sql.Tx, done func(), err error) {
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	q := "PRAGMA synchronous = NORMAL"
	if full {
		q = "PRAGMA synchronous = FULL"
	}
	if _, err := c.ExecContext(ctx, q); err != nil {
		c.Close()
		return nil, nil, err
	}
	tx, err = c.BeginTx(ctx, nil)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return tx, func() { c.Close() }, nil
}

// Explain is explain for the stores' own errors.
func Explain(err error) error { return explain(err) }
