package budget

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/internal/redistest"
)

// storeKind makes empty stores of one implementation, so that every
// behavioural test runs against Memory and File alike.
type storeKind struct {
	name string
	open func(t testing.TB) Store
	// reopen returns the store as a restart would find it: for File, closed
	// and opened again; for Memory, the same store.
	reopen func(t testing.TB, s Store) Store
}

var storeKinds = []storeKind{
	{
		name:   "Memory",
		open:   func(testing.TB) Store { return NewMemory() },
		reopen: func(_ testing.TB, s Store) Store { return s },
	},
	{
		name: "File",
		open: func(t testing.TB) Store {
			return openFile(t, filepath.Join(tempDir(t), "spend.log"))
		},
		reopen: func(t testing.TB, s Store) Store {
			f := s.(*File)
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			return openFile(t, f.path)
		},
	},
	{
		name: "SQLite",
		open: func(t testing.TB) Store {
			return openSQLite(t, filepath.Join(tempDir(t), "spend.db"))
		},
		reopen: func(t testing.TB, s Store) Store {
			q := s.(*SQLite)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			return openSQLite(t, q.path)
		},
	},
	{
		name: "Redis",
		open: func(t testing.TB) Store {
			return openRedis(t, redistest.Start(t).URL())
		},
		reopen: func(t testing.TB, s Store) Store {
			r := s.(*Redis)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			return openRedis(t, r.url)
		},
	},
}

// openRedis opens a Redis store that is closed when the test ends.
func openRedis(t testing.TB, url string) *Redis {
	t.Helper()
	r, err := OpenRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// openRedisIn opens a Redis store keeping its state in dir (OpenRedisIn),
// closed when the test ends if the test has not closed it (as a proxy
// that stops) before.
func openRedisIn(t testing.TB, url, dir string) *Redis {
	t.Helper()
	s, err := OpenRedisIn(url, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tempDir is t.TempDir with symbolic links resolved, as OpenFile resolves
// them (on macOS the temporary directory is behind one), so that tests can
// look for the path in messages.
func tempDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// forEachStore runs test as a subtest for each kind of store.
func forEachStore(t *testing.T, test func(t *testing.T, k storeKind)) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) { test(t, k) })
	}
}

// openSQLite opens a SQLite store that is closed when the test ends.
func openSQLite(t testing.TB, path string) *SQLite {
	t.Helper()
	s, err := OpenSQLite(path, SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openFile opens a File that is closed when the test ends.
func openFile(t testing.TB, path string) *File {
	t.Helper()
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// spend commits amount at each key, with no limit in the way.
func spend(t testing.TB, s Store, amount int64, keys ...string) {
	t.Helper()
	var levels []Level
	for _, k := range keys {
		levels = append(levels, Level{Key: k, Limit: math.MaxInt64})
	}
	r, err := s.Reserve(levels, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(r, amount); err != nil {
		t.Fatal(err)
	}
}

func mustReserve(t testing.TB, s Store, levels []Level, cost int64) *Reservation {
	t.Helper()
	r, err := s.Reserve(levels, cost)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantSpent checks the spend of each key.
func wantSpent(t testing.TB, s Store, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got := s.Spent(k); got != v {
			t.Errorf("Spent(%q) = %d, want %d", k, got, v)
		}
	}
}

// crash abandons f the way a killed process would: the log is left as it
// is (no rewrite) and the lock is dropped.
func crash(t testing.TB, f *File) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.log != nil {
		f.log.Close()
	}
	f.closed = true
	f.unlock()
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func isExceeded(err error) bool {
	var e *ExceededError
	return errors.As(err, &e) && errors.Is(err, ErrExceeded)
}
