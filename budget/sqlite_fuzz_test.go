package budget

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/internal/sqlitedb"
)

// FuzzOpenSQLite: a spend store file of any bytes (a database damaged or
// forged, a spend log, anything) is opened or refused, never a panic; a
// store that opens reserves within its limits or refuses with an error,
// and ReadUsage reads it or says why not.
func FuzzOpenSQLite(f *testing.F) {
	dir := f.TempDir()
	good := filepath.Join(dir, "good.db")
	s, err := OpenSQLite(good, SQLiteOptions{})
	if err != nil {
		f.Fatal(err)
	}
	r, err := s.Reserve([]Level{{"root", 100}, {"root/a", 50}}, 10)
	if err != nil {
		f.Fatal(err)
	}
	s.Commit(r, 7)
	mustReserve(f, s, []Level{{"root", 100}}, 3) // left open: settled at Close
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	db, err := os.ReadFile(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(db)
	f.Add(db[:len(db)/2])
	f.Add([]byte(sqlitedb.Header))
	f.Add([]byte(sqlitedb.Header + "\x10\x00\x01\x01\x00\x40\x20\x20"))
	f.Add([]byte(`{"op":"total","delta":100,"keys":["root"]}` + "\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "spend.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, "")
		if err != nil {
			return
		}
		before := s.Spent("root")
		r, err := s.Reserve([]Level{{"root", 1 << 40}}, 1)
		if err == nil {
			if got := s.Spent("root"); got != addSat(before, 1) {
				t.Errorf("spent %d after a reservation of 1 over %d", got, before)
			}
			s.Release(r)
		}
		s.Close()
		ReadUsage(path)
	})
}
