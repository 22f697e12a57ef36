package budget

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisconn"
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
		return 0, errors.New("budget: migrate a store to itself")
	}
	if !redisconn.IsURL(to) {
		if _, err := os.Lstat(to); err == nil {
			return 0, fmt.Errorf("spend store %s exists: migrate to a new file", to)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("spend store %s: %w", to, err)
		}
	}
	var us []Usage
	if redisconn.IsURL(from) {
		var err error
		if us, err = ReadUsage(from); err != nil {
			return 0, err
		}
	} else {
		if _, err := os.Stat(from); err != nil {
			return 0, fmt.Errorf("spend store %s: %w", from, err)
		}
		f, err := OpenFile(from)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if us, err = ReadUsage(f.path); err != nil {
			return 0, err
		}
	}
	var err error
	if redisconn.IsURL(to) {
		err = writeRedisUsage(to, us)
	} else {
		err = writeFileUsage(to, us)
	}
	if err != nil {
		return 0, err
	}
	return len(us), checkMigrated(to, us)
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

// writeFileUsage writes usage as a new spend log of totals.
func writeFileUsage(path string, us []Usage) error {
	var l ledger
	for _, u := range us {
		if err := checkKey(u.Key); err != nil {
			return err
		}
		if s := addSat(u.Committed, u.Reserved); s != 0 {
			l.add([]string{u.Key}, s)
		}
		if u.Recorded {
			l.record([]string{u.Key}, []int64{u.Limit}, u.Calls, min(max(u.LastCall.UnixMilli(), 1), maxAt))
		}
	}
	if err := fsutil.WriteFileAtomic(path, l.appendTotals(nil), fileMode); err != nil {
		return fmt.Errorf("spend store %s: %w", path, err)
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
