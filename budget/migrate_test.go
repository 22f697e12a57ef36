package budget

import (
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/internal/redistest"
)

// A file store moved to Redis and back keeps every key's spend, held cost
// included, and its calls.
func TestMigrateFileToRedisAndBack(t *testing.T) {
	dir := tempDir(t)
	src := filepath.Join(dir, "spend.log")
	f, err := OpenFile(src)
	if err != nil {
		t.Fatal(err)
	}
	levels := []Level{{"ISSUER/1:a", 1000}, {"ISSUER/1:a/1:b", 500}}
	for _, c := range []int64{100, 250} {
		r := mustReserve(t, f, levels, c)
		if err := f.Commit(r, c-10); err != nil {
			t.Fatal(err)
		}
	}
	mustReserve(t, f, levels, 40) // never settled: counts as spent
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"ISSUER/1:a": 370, "ISSUER/1:a/1:b": 370}

	srv := redistest.Start(t)
	if n, err := Migrate(src, srv.URL()); err != nil || n != 2 {
		t.Fatalf("Migrate to Redis: %d keys, %v", n, err)
	}
	wantSpent(t, openRedis(t, srv.URL()), want)
	if _, err := Migrate(src, srv.URL()); err == nil {
		t.Fatal("Migrate into a store that holds spend succeeded")
	}

	back := filepath.Join(dir, "back.log")
	if n, err := Migrate(srv.URL(), back); err != nil || n != 2 {
		t.Fatalf("Migrate to a file: %d keys, %v", n, err)
	}
	wantSpent(t, openSQLite(t, back), want)
	us, err := ReadUsage(back)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Calls != 3 || us[0].Limit != 1000 || us[1].Limit != 500 {
		t.Fatalf("the calls' record was lost: %+v", us)
	}
	if _, err := Migrate(srv.URL(), back); err == nil {
		t.Fatal("Migrate over an existing file succeeded")
	}
}
