package budget

import (
	"bufio"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/sqlitedb"
)

// Stores opened on one database share every key's spend: four stores,
// 50 goroutines each, race for a tree whose root has room for 120 calls;
// exactly 120 win and every level counts them exactly.
func TestSQLiteSharedExactAcrossStores(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.db")
	stores := make([]*SQLite, 4)
	for i := range stores {
		stores[i] = openSQLite(t, path)
	}
	const cost = 10
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won = map[string]int64{}
	)
	start := make(chan struct{})
	for i := range 200 {
		wg.Go(func() {
			<-start
			s := stores[i%4]
			child := []string{"root/a", "root/b"}[i%2]
			r, err := s.Reserve([]Level{{"root", 120 * cost}, {child, 100 * cost}}, cost)
			if err != nil {
				if !errors.Is(err, ErrExceeded) {
					t.Errorf("call %d: %v", i, err)
				}
				return
			}
			if err := s.Commit(r, cost); err != nil {
				t.Errorf("commit %d: %v", i, err)
			}
			mu.Lock()
			won["root"] += cost
			won[child] += cost
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if won["root"] != 120*cost {
		t.Fatalf("%d calls won, want 120", won["root"]/cost)
	}
	for _, s := range stores {
		wantSpent(t, s, won)
	}
	// Commits at the reserved cost run after Commit returns; closing the
	// stores runs them.
	for _, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	us, err := ReadUsage(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Committed != won[u.Key] || u.Reserved != 0 || u.Calls != won[u.Key]/cost {
			t.Errorf("usage of %s: %+v, want committed %d", u.Key, u, won[u.Key])
		}
	}
}

// crashSQLite drops a store as kill -9 would: its lock goes, its
// reservations stay open in the database.
func crashSQLite(t testing.TB, s *SQLite) {
	t.Helper()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.unlock()
	s.db.Close()
}

// The reservations of a store whose process died count as spent, and the
// next store opened settles them at their reserved cost; a live store's
// are left alone.
func TestSQLiteSettlesDeadOwner(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.db")
	live := openSQLite(t, path)
	dead := openSQLite(t, path)
	lv := []Level{{"root", 100}, {"root/a", 50}}
	rl := mustReserve(t, live, lv, 10)
	mustReserve(t, dead, lv, 20)
	crashSQLite(t, dead)
	wantSpent(t, live, map[string]int64{"root": 30, "root/a": 30})
	next := openSQLite(t, path)
	us, err := ReadUsage(path)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Committed != 20 || us[0].Reserved != 10 {
		t.Fatalf("after settling: %+v, want 20 committed (the dead store's), 10 held (the live one's)", us[0])
	}
	if err := live.Commit(rl, 4); err != nil {
		t.Fatal(err)
	}
	wantSpent(t, next, map[string]int64{"root": 24, "root/a": 24})
	if _, err := os.Stat(filepath.Join(ownersDir(path), dead.owner+".lock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead owner's lock file is left: %v", err)
	}
}

// A reservation settled by another store (whose owner lock file was
// removed by hand, say) and then committed is not counted twice.
func TestSQLiteCommitAfterSettle(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.db")
	a := openSQLite(t, path)
	r := mustReserve(t, a, []Level{{"root", 100}}, 30)
	b := openSQLite(t, path)
	if err := b.settleOwner(a.owner); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(r, 12); err != nil {
		t.Fatal(err)
	}
	wantSpent(t, b, map[string]int64{"root": 12})
}

// A database another process holds locked past the busy timeout refuses
// a reservation with a store error, never ErrExceeded; the spend is
// unchanged and calls go through once the lock is let go.
func TestSQLiteLockedIsUnavailableNotExceeded(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.db")
	s, err := OpenSQLite(path, SQLiteOptions{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE spend SET held = held`); err != nil {
		t.Fatal(err)
	}
	_, err = s.Reserve([]Level{{"root", 100}}, 10)
	if err == nil || errors.Is(err, ErrExceeded) || !strings.Contains(err.Error(), "busy timeout") {
		t.Fatalf("Reserve on a locked database: %v, want a store error naming the busy timeout", err)
	}
	tx.Rollback()
	mustReserve(t, s, []Level{{"root", 100}}, 10)
	wantSpent(t, s, map[string]int64{"root": 10})
}

// A damaged database is refused when opened, with what to do.
func TestSQLiteCorruptRefused(t *testing.T) {
	dir := tempDir(t)
	path := filepath.Join(dir, "spend.db")
	s := openSQLite(t, path)
	spend(t, s, 5, "root")
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < len(b); i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, "")
	if err == nil || !strings.Contains(err.Error(), "spend store "+path) {
		t.Fatalf("Open of a damaged database: %v", err)
	}
}

// A database in a directory the proxy cannot write is refused when
// opened, not at the first call.
func TestSQLiteReadOnlyDirRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		// root writes anywhere: make the directory read-only by a mount
		// that is not there, so test the open of a file in a file.
		dir := tempDir(t)
		writeFile(t, filepath.Join(dir, "f"), "x")
		if _, err := Open(filepath.Join(dir, "f", "spend.db"), ""); err == nil {
			t.Fatal("Open under a file succeeded")
		}
		return
	}
	dir := tempDir(t)
	os.Chmod(dir, 0o500)
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	if _, err := Open(filepath.Join(dir, "spend.db"), ""); err == nil {
		t.Fatal("Open in a read-only directory succeeded")
	}
}

// Open gives a new path a database, and a spend log of the File format
// the File, with a warning naming store migrate; migrating in place keeps
// the spend and the log.
func TestOpenChoosesAndMigratesInPlace(t *testing.T) {
	dir := tempDir(t)
	s, err := Open(filepath.Join(dir, "new.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*SQLite); !ok {
		t.Fatalf("Open of a new path: %T, want *SQLite", s)
	}
	s.Close()
	legacy := filepath.Join(dir, "spend.log")
	f := openFile(t, legacy)
	spend(t, f, 70, "root", "root/a")
	mustReserve(t, f, []Level{{"root", 1000}}, 5)
	f.Close()
	s, err = Open(legacy, "")
	if err != nil {
		t.Fatal(err)
	}
	w := s.(*File).Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "delegateos store migrate --from "+legacy+" --to "+legacy) {
		t.Fatalf("warnings %q", w)
	}
	s.Close()
	if n, err := Migrate(legacy, legacy); err != nil || n != 2 {
		t.Fatalf("Migrate in place: %d, %v", n, err)
	}
	if ok, _ := sqlitedb.IsDB(legacy); !ok {
		t.Fatal("the store is not a database after the migration")
	}
	if _, err := os.Stat(legacy + ".log-migrated"); err != nil {
		t.Fatalf("the log was not kept: %v", err)
	}
	s, err = Open(legacy, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantSpent(t, s, map[string]int64{"root": 75, "root/a": 70})
	if _, err := Migrate(legacy, legacy); err == nil || !strings.Contains(err.Error(), "nothing to migrate") {
		t.Fatalf("second Migrate in place: %v", err)
	}
}

// sqliteHelperEnv makes the test binary a process that opens the store
// named by its value, begins a write transaction, holds a cost at a key
// without committing, says so on stdout and waits to be killed.
const sqliteHelperEnv = "DELEGATEOS_TEST_SQLITE_HELPER"

func init() {
	path := os.Getenv(sqliteHelperEnv)
	if path == "" {
		return
	}
	s, err := OpenSQLite(path, SQLiteOptions{})
	if err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(3)
	}
	r, err := s.Reserve([]Level{{"root", 1000}}, 7) // open: settled after the kill
	if err != nil || r == nil {
		os.Exit(3)
	}
	tx, done, err := sqlitedb.Begin(s.db, true)
	if err != nil {
		os.Exit(3)
	}
	defer done()
	if _, err := tx.Exec(`UPDATE spend SET committed = committed + 500, held = held + 500 WHERE key = 'root'`); err != nil {
		os.Exit(3)
	}
	if _, err := tx.Exec(`INSERT INTO reservation(owner, cost, keys) VALUES('x', 1, '["root"]')`); err != nil {
		os.Exit(3)
	}
	os.Stdout.WriteString("in transaction\n")
	select {}
}

// A process killed (-9) inside a write transaction leaves nothing of it:
// the next store finds the spend as it was before the transaction, the
// database unlocked, and the dead process's committed reservation
// settled at its cost.
func TestSQLiteKilledInWriteTransaction(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sqliteHelperEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "in transaction\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	s, err := OpenSQLite(path, SQLiteOptions{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("open after the kill: %v", err)
	}
	defer s.Close()
	wantSpent(t, s, map[string]int64{"root": 7})
	us, err := ReadUsage(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 || us[0].Committed != 7 || us[0].Reserved != 0 || us[0].Calls != 1 {
		t.Fatalf("after the kill: %+v, want the one reservation settled at 7", us)
	}
	mustReserve(t, s, []Level{{"root", 1000}}, 3)
}
