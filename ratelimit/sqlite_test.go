package ratelimit

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// openSQLite opens a SQLite store at path, closed when the test ends.
func openSQLite(t testing.TB, path string, limits map[string]Limit) *SQLite {
	t.Helper()
	s, err := OpenSQLite(path, limits, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sqliteTested(s *SQLite) tested {
	return tested{s, time.Nanosecond, func(now time.Time) int64 { return now.UnixNano() }}
}

// The in-memory limiter's properties hold in the shared database, with
// time stepped by the test.
func TestSQLiteProperties(t *testing.T) {
	dir := t.TempDir()
	n := 0
	fresh := func(limits map[string]Limit) tested {
		n++
		return sqliteTested(openSQLite(t, filepath.Join(dir, strings.Repeat("x", n)+".db"), limits))
	}
	t.Run("WindowNeverOverLimit", func(t *testing.T) {
		checkWindowNeverOverLimit(t, 4, 500, fresh)
	})
	t.Run("RetryAfterIsExact", func(t *testing.T) {
		checkRetryAfterIsExact(t, fresh(map[string]Limit{"p": {N: 2, Per: time.Minute}}))
	})
	t.Run("AllOrNothing", func(t *testing.T) {
		checkAllOrNothing(t, fresh(map[string]Limit{"p": {N: 2, Per: time.Minute}, "r": {N: 1, Per: time.Minute}}))
	})
	t.Run("RepeatedAndNoKeys", func(t *testing.T) {
		checkRepeatedAndNoKeys(t, fresh(map[string]Limit{"p": {N: 2, Per: time.Minute}}))
	})
	t.Run("Release", func(t *testing.T) {
		checkRelease(t, fresh(map[string]Limit{"p": {N: 1, Per: time.Minute}}))
	})
}

// Four stores on one database, as four proxies: 120 calls race for a
// key with 5 slots; exactly 5 are admitted, whichever store each came to.
func TestSQLiteLastSlotOnceAcrossStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spend.db")
	limits := map[string]Limit{"p": {N: 5, Per: time.Hour}}
	var stores []*SQLite
	for range 4 {
		stores = append(stores, openSQLite(t, path, limits))
	}
	keys := []Key{{"p", "root"}, {"p", "root/9:del_child"}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 120 {
		wg.Go(func() {
			<-start
			_, err := stores[i%4].Reserve(keys, time.Now())
			switch {
			case err == nil:
				admitted.Add(1)
			case !errors.Is(err, ErrLimited):
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := admitted.Load(); got != 5 {
		t.Fatalf("%d calls admitted, want 5", got)
	}
}

// Two policies that give one limit name different rates count apart, and
// a database locked past the busy timeout refuses with a store error,
// never a *LimitedError.
func TestSQLiteRatesApartAndLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spend.db")
	strict, err := OpenSQLite(path, map[string]Limit{"p": {N: 1, Per: time.Hour}}, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	lenient := openSQLite(t, path, map[string]Limit{"p": {N: 100, Per: time.Hour}})
	k := []Key{{"p", "root"}}
	for range 3 {
		if _, err := lenient.Reserve(k, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := strict.Reserve(k, time.Now()); err != nil {
		t.Fatalf("the strict rate counts the lenient one's calls: %v", err)
	}
	if _, err := strict.Reserve(k, time.Now()); !errors.Is(err, ErrLimited) {
		t.Fatalf("second strict call: %v", err)
	}
	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`DELETE FROM rate WHERE 0`); err != nil {
		t.Fatal(err)
	}
	_, err = strict.Reserve([]Key{{"p", "other"}}, time.Now())
	if err == nil || errors.Is(err, ErrLimited) || !strings.Contains(err.Error(), "busy timeout") {
		t.Fatalf("Reserve on a locked database: %v", err)
	}
	tx.Rollback()
}

// The windows of a rate-limit file of an earlier version are imported,
// and the file set aside.
func TestSQLiteImport(t *testing.T) {
	dir := t.TempDir()
	limits := map[string]Limit{"p": {N: 2, Per: time.Hour}}
	old := filepath.Join(dir, "spend.log.rates")
	l, err := OpenFile(old, limits, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	k := []Key{{"p", "root"}}
	for range 2 {
		if _, err := l.Reserve(k, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	s := openSQLite(t, filepath.Join(dir, "spend.db"), limits)
	if n, err := s.Import(old, time.Now()); err != nil || n != 2 {
		t.Fatalf("Import: %d, %v", n, err)
	}
	if _, err := os.Stat(old + ".migrated"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(k, time.Now()); !errors.Is(err, ErrLimited) {
		t.Fatalf("after the import: %v, want limited", err)
	}
	if n, err := s.Import(old, time.Now()); err != nil || n != 0 {
		t.Fatalf("second Import: %d, %v", n, err)
	}
}
