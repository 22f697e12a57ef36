package budget

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/sqlitedb"
)

// Migrate copies a spend store, a file or a redis:// or rediss:// URL, to
// another, which must be empty (a file that does not exist, or a Redis
// store without spend), and returns the keys copied. Every key keeps its
// spend: committed plus held, since a reservation no proxy will settle
// counts as spent, as a File counts it when it is opened; and its record
// of calls. The copy is read back and compared before Migrate returns.
//
// A file is held (its lock taken) while it is read, so no proxy can spend
// from it meanwhile; the proxies of a Redis store must be stopped first.
func Migrate(from, to string) (int, error) {
	if from == to {
		if redisconn.IsURL(from) {
			return 0, errors.New("budget: migrate a store to itself")
		}
		return migrateInPlace(from)
	}
	if !redisconn.IsURL(to) {
		if _, err := os.Lstat(to); err == nil {
			return 0, fmt.Errorf("spend store %s exists: migrate to a new file", to)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("spend store %s: %w", to, err)
		}
	}
	us, done, err := readForMigrate(from)
	if err != nil {
		return 0, err
	}
	defer done()
	if redisconn.IsURL(to) {
		err = writeRedisUsage(to, us)
	} else {
		err = writeSQLiteUsage(to, us)
	}
	if err != nil {
		return 0, err
	}
	return len(us), checkMigrated(to, us)
}

// readForMigrate reads every key's usage of the store from; a spend log
// is held (its lock taken) until done is called.
func readForMigrate(from string) (us []Usage, done func(), err error) {
	done = func() {}
	if redisconn.IsURL(from) {
		us, err = ReadUsage(from)
		return us, done, err
	}
	if _, err := os.Stat(from); err != nil {
		return nil, done, fmt.Errorf("spend store %s: %w", from, err)
	}
	if db, err := sqlitedb.IsDB(from); err != nil {
		return nil, done, fmt.Errorf("spend store %s: %w", from, err)
	} else if db {
		us, err = readSQLiteUsage(from)
		return us, done, err
	}
	f, err := OpenFile(from)
	if err != nil {
		return nil, done, err
	}
	if us, err = ReadUsage(f.path); err != nil {
		f.Close()
		return nil, done, err
	}
	return us, func() { f.Close() }, nil
}

// migrateInPlace turns the spend log at path into a database at the same
// path, so that the policy need not change: the database is written next
// to it, read back and compared, the log kept as path + ".log-migrated"
// and the database renamed into its place, all while the log is held, so
// that no proxy spends from it meanwhile.
func migrateInPlace(path string) (int, error) {
	if db, err := sqlitedb.IsDB(path); err != nil {
		return 0, fmt.Errorf("spend store %s: %w", path, err)
	} else if db {
		return 0, fmt.Errorf("spend store %s is a shared database already: nothing to migrate", path)
	}
	us, done, err := readForMigrate(path)
	if err != nil {
		return 0, err
	}
	defer done()
	tmp, backup := path+".migrating", path+".log-migrated"
	if _, err := os.Lstat(backup); err == nil {
		return 0, fmt.Errorf("spend store %s: %s exists (an earlier migration's copy of the log): move it away first", path, backup)
	}
	for _, p := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
		os.Remove(p)
	}
	if err := writeSQLiteUsage(tmp, us); err != nil {
		return 0, err
	}
	if err := checkMigrated(tmp, us); err != nil {
		os.Remove(tmp)
		return 0, err
	}
	if err := os.Link(path, backup); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("spend store %s: keep the log as %s: %w", path, backup, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		os.Remove(backup)
		return 0, fmt.Errorf("spend store %s: %w", path, err)
	}
	if err := fsutil.SyncDir(filepath.Dir(path)); err != nil {
		return 0, fmt.Errorf("spend store %s: %w", path, err)
	}
	return len(us), nil
}

// writeRedisUsage writes usage into an empty Redis store, in one
// transaction per delegation tree. A failure part way leaves some trees
// written: the store is then not empty, and a new attempt is refused
// until it is emptied.
func writeRedisUsage(rawURL string, us []Usage) error {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return fmt.Errorf("spend store: %w", err)
	}
	defer c.Close()
	what := "spend store " + redisconn.Redact(rawURL)
	ctx := context.Background()
	// One SCAN call looks at a part of the keys only: the scan goes on
	// until the cursor comes back to 0 or a spend key is found.
	errHolds := fmt.Errorf("%s already holds spend: migrate to an empty store", what)
	err = redisconn.Scan(ctx, c, spendKeyPrefix+"*", func(names []string) error {
		if len(names) > 0 {
			return errHolds
		}
		return nil
	})
	if err == errHolds {
		return err
	}
	if err != nil {
		return redisconn.Unavailable(what, err)
	}
	// One transaction per tree (its issuer is its keys' hash tag), since
	// a Redis Cluster runs a transaction on one slot only; on one server
	// as on a cluster.
	byTree := map[string][]Usage{}
	var trees []string
	for _, u := range us {
		tag := redisconn.HashTag(u.Key)
		if _, ok := byTree[tag]; !ok {
			trees = append(trees, tag)
		}
		byTree[tag] = append(byTree[tag], u)
	}
	for _, tag := range trees {
		_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, u := range byTree[tag] {
				fields := []any{"c", addSat(u.Committed, u.Reserved), "h", 0}
				if u.Recorded {
					fields = append(fields, "n", u.Calls, "t", u.LastCall.UnixMilli(), "l", u.Limit)
				}
				p.HSet(ctx, spendKey(u.Key), fields...)
			}
			return nil
		})
		if err != nil {
			return redisconn.Unavailable(what, err)
		}
	}
	return nil
}

// checkMigrated reads the new store back and compares each key's spend
// and calls with what was copied.
func checkMigrated(to string, want []Usage) error {
	got, err := ReadUsage(to)
	if err != nil {
		return fmt.Errorf("the copy cannot be read back: %w", err)
	}
	byKey := make(map[string]Usage, len(got))
	for _, u := range got {
		byKey[u.Key] = u
	}
	for _, w := range want {
		g := byKey[w.Key]
		if addSat(g.Committed, g.Reserved) != addSat(w.Committed, w.Reserved) || g.Calls != w.Calls {
			return fmt.Errorf("the copy of %q reads back as spent %d over %d calls, not %d over %d", w.Key,
				addSat(g.Committed, g.Reserved), g.Calls, addSat(w.Committed, w.Reserved), w.Calls)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("the copy holds %d keys, not %d", len(got), len(want))
	}
	return nil
}
