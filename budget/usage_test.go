package budget

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func ms(at int64) time.Time { return time.UnixMilli(at).UTC() }

// ReadUsage splits each key's spend into committed and held, and counts
// its calls, from what a File wrote: before and after a rewrite, and after
// a restart.
func TestReadUsage(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	f.now = clock()
	r1 := mustReserve(t, f, lv2, 250) // committed at 200
	r2 := mustReserve(t, f, lv2, 100) // released
	mustReserve(t, f, []Level{{"root", 1000}}, 0)
	r4 := mustReserve(t, f, lv2, 40) // left open
	if err := f.Commit(r1, 200); err != nil {
		t.Fatal(err)
	}
	if err := f.Release(r2); err != nil {
		t.Fatal(err)
	}
	want := []Usage{
		{Key: "root", Committed: 200, Reserved: 40, Recorded: true, Calls: 4, LastCall: ms(1767225603000), Limit: 1000},
		{Key: "root/a", Committed: 200, Reserved: 40, Recorded: true, Calls: 3, LastCall: ms(1767225603000), Limit: 500},
	}
	check := func(when string) {
		t.Helper()
		got, err := ReadUsage(path)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ReadUsage = %+v\nwant %+v", when, got, want)
		}
		for _, u := range got {
			if s := f.Spent(u.Key); u.Committed+u.Reserved != s {
				t.Errorf("%s: %s has %d committed and %d held; the store says %d spent", when, u.Key, u.Committed, u.Reserved, s)
			}
		}
	}
	check("appended")
	f.mu.Lock()
	f.compact()
	f.mu.Unlock()
	check("rewritten")
	if err := f.Commit(r4, 30); err != nil {
		t.Fatal(err)
	}
	want[0].Committed, want[0].Reserved = 230, 0
	want[1].Committed, want[1].Reserved = 230, 0
	check("committed after the rewrite")
	// Committed at the reserved cost: the reserve line has the spend, and
	// the commit line ends the reservation.
	if err := f.Commit(mustReserve(t, f, lv2, 20), 20); err != nil {
		t.Fatal(err)
	}
	want[0].Committed, want[0].Calls, want[0].LastCall = 250, 5, ms(1767225604000)
	want[1].Committed, want[1].Calls, want[1].LastCall = 250, 4, ms(1767225604000)
	check("committed at the reserved cost")

	// A proxy that dies with a reservation open: held until the next open,
	// which counts it as committed.
	mustReserve(t, f, lv2, 9)
	crash(t, f)
	want[0].Reserved, want[0].Calls, want[0].LastCall = 9, 6, ms(1767225605000)
	want[1].Reserved, want[1].Calls, want[1].LastCall = 9, 5, ms(1767225605000)
	check("crashed")
	f = openFile(t, path)
	want[0].Committed, want[0].Reserved = 259, 0
	want[1].Committed, want[1].Reserved = 259, 0
	check("reopened")
}

func TestReadUsageLogs(t *testing.T) {
	tests := []struct {
		name, log string
		want      []Usage
	}{
		{"empty", "", []Usage{}},
		{"written before calls were recorded", `{"op":"total","delta":100,"keys":["root"]}
{"op":"reserve","id":1,"delta":30,"keys":["root","root/a"]}
{"op":"commit","id":1,"delta":-10,"keys":["root","root/a"]}
{"op":"reserve","id":2,"delta":5,"keys":["root"]}
`, []Usage{{Key: "root", Committed: 120, Reserved: 5}, {Key: "root/a", Committed: 20}}},
		// An earlier version folded open reservations into the totals: their
		// ends change the committed spend.
		{"the end of a reservation folded into a total", `{"op":"total","delta":100,"keys":["root"]}
{"op":"commit","id":4,"delta":-10,"keys":["root"]}
{"op":"release","id":5,"delta":-20,"keys":["root"]}
`, []Usage{{Key: "root", Committed: 70}}},
		{"a torn last line", `{"op":"reserve","id":1,"delta":30,"keys":["root"],"limits":[50],"at":1767225600000}
{"op":"commit","id":1,"delta":5,"keys":["ro`, []Usage{{Key: "root", Reserved: 30, Recorded: true, Calls: 1, LastCall: ms(1767225600000), Limit: 50}}},
		{"the limit of the latest call", `{"op":"total","delta":1,"keys":["k"],"limits":[10],"calls":2,"at":1767225609000}
{"op":"reserve","id":1,"delta":0,"keys":["k"],"limits":[20],"at":1767225601000}
{"op":"reserve","id":2,"delta":0,"keys":["k"],"limits":[30],"at":1767225609000}
`, []Usage{{Key: "k", Committed: 1, Recorded: true, Calls: 4, LastCall: ms(1767225609000), Limit: 30}}},
		{"calls that spent nothing", `{"op":"total","delta":0,"keys":["k"],"limits":[10],"calls":2,"at":1767225600000}
`, []Usage{{Key: "k", Recorded: true, Calls: 2, LastCall: ms(1767225600000), Limit: 10}}},
		{"a key whose spend went back to nothing", `{"op":"total","delta":10,"keys":["k"]}
{"op":"release","id":3,"delta":-10,"keys":["k"]}
`, []Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), "spend.log")
			writeFile(t, path, tt.log)
			got, err := ReadUsage(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReadUsage = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// ReadUsage refuses what OpenFile refuses, and lines that end a
// reservation they do not match; the error names the file and the line.
func TestReadUsageRefuses(t *testing.T) {
	const reserve = `{"op":"reserve","id":1,"delta":30,"keys":["root","root/a"]}` + "\n"
	tests := []struct{ name, log, want string }{
		{"unknown member", `{"op":"total","delta":1,"keys":["a"],"x":1}` + "\n", `line 1: unknown member "x"`},
		{"empty line", reserve + "\n" + reserve, "line 2: empty line"},
		{"below zero", `{"op":"release","id":9,"delta":-1,"keys":["root"]}` + "\n", `line 1: the committed spend of "root" would fall below zero`},
		{"reserved twice", reserve + reserve, "line 2: reservation 1 is reserved again before it has ended"},
		{"other keys", reserve + `{"op":"commit","id":1,"delta":1,"keys":["root"]}` + "\n", "line 2: the commit of reservation 1 names other keys than its reserve"},
		{"a release of other than the hold", reserve + `{"op":"release","id":1,"delta":-20,"keys":["root","root/a"]}` + "\n", "line 2: the release of reservation 1 drops 20, but it holds 30"},
		{"a commit below zero", reserve + `{"op":"commit","id":1,"delta":-31,"keys":["root","root/a"]}` + "\n", "line 2: the commit of reservation 1 drops 31, but it holds 30"},
		{"past the largest spend", `{"op":"total","delta":9223372036854775807,"keys":["a"]}` + "\n" + `{"op":"commit","id":1,"delta":5,"keys":["a"]}` + "\n", `line 2: the spend of "a" would pass 9223372036854775807`},
		{"a line too long", `{"op":"total","delta":1,"keys":["` + strings.Repeat("k", 2*maxLineLen) + `"]}` + "\n", "line 1: over the limit of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), "spend.log")
			writeFile(t, path, tt.log)
			_, err := ReadUsage(path)
			if err == nil || !strings.Contains(err.Error(), "spend store "+path+": "+tt.want) {
				t.Errorf("ReadUsage: %v, want an error naming the store and containing %q", err, tt.want)
			}
		})
	}
	dir := tempDir(t)
	if _, err := ReadUsage(filepath.Join(dir, "missing.log")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing store: %v, want fs.ErrNotExist", err)
	}
	if _, err := ReadUsage(dir); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.log")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("ReadUsage created the store")
	}
}

// A log larger than the bound is refused without being read whole.
func TestReadUsageBound(t *testing.T) {
	defer func(n int64) { maxReadBytes = n }(maxReadBytes)
	maxReadBytes = 100
	line := `{"op":"total","delta":1,"keys":["a"]}` + "\n"
	if _, err := readUsage(strings.NewReader(strings.Repeat(line, 2))); err != nil {
		t.Fatalf("a log within the bound: %v", err)
	}
	if _, err := readUsage(strings.NewReader(strings.Repeat(line, 3))); err == nil || !strings.Contains(err.Error(), "larger than 100 bytes") {
		t.Errorf("a log over the bound: %v", err)
	}
}

// ReadUsage reads a log while a File appends to it and rewrites it, and
// takes no lock from it. Every read is a state the store was in: each call
// reserves 10 at both levels and commits 7, so at both keys the committed
// spend is 7 per settled call and the held cost 10 per open one, and the
// counts never go back.
func TestReadUsageWhileWriting(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	f.compactAfter = 16
	levels := []Level{{"root", 1 << 40}, {"root/a", 1 << 40}}
	const writers, calls = 4, 100
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range calls {
				r, err := f.Reserve(levels, 10)
				if err != nil {
					t.Error(err)
					return
				}
				if err := f.Commit(r, 7); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reads, last := 0, int64(0)
	for running := true; running; reads++ {
		select {
		case <-done:
			running = false
		default:
		}
		us, err := ReadUsage(path)
		if err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		if len(us) == 0 {
			continue
		}
		if len(us) != 2 || us[0].Key != "root" || us[1].Key != "root/a" {
			t.Fatalf("read %d: %+v", reads, us)
		}
		a, b := us[0], us[1]
		if a.Committed != b.Committed || a.Reserved != b.Reserved || a.Calls != b.Calls ||
			a.Committed%7 != 0 || a.Reserved%10 != 0 || a.Committed/7+a.Reserved/10 != a.Calls || a.Calls < last {
			t.Fatalf("read %d after %d calls: %+v", reads, last, us)
		}
		last = a.Calls
	}
	us, err := ReadUsage(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := int64(writers * calls); us[1].Calls != n || us[1].Committed != 7*n || us[1].Reserved != 0 {
		t.Errorf("at the end: %+v, want %d calls", us[1], n)
	}
	t.Logf("%d reads while %d calls were made", reads, writers*calls)
}

func ExampleReadUsage() {
	dir, _ := os.MkdirTemp("", "spend")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "spend.log")
	store, _ := OpenFile(path)
	levels := []Level{{Key: "ISSUER/16:del_a11ce0000001", Limit: 1_000_000}, {Key: "ISSUER/16:del_a11ce0000001/16:del_b0b000000001", Limit: 50_000}}
	r, _ := store.Reserve(levels, 2500)
	store.Commit(r, 2000)
	store.Reserve(levels, 1000) // in flight

	us, _ := ReadUsage(path) // while the store is open
	for _, u := range us {
		fmt.Printf("%s: budget %d, committed %d, reserved %d, %d calls\n", u.Key, u.Limit, u.Committed, u.Reserved, u.Calls)
	}
	store.Close()
	// Output:
	// ISSUER/16:del_a11ce0000001: budget 1000000, committed 2000, reserved 1000, 2 calls
	// ISSUER/16:del_a11ce0000001/16:del_b0b000000001: budget 50000, committed 2000, reserved 1000, 2 calls
}
