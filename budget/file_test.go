package budget

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var lv2 = []Level{{"root", 1000}, {"root/a", 500}}

// clock returns a File clock that starts at Unix millisecond 1767225600000
// (2026-01-01T00:00:00Z) and moves a second a call.
func clock() func() time.Time {
	at := time.UnixMilli(1767225600000 - 1000)
	return func() time.Time {
		at = at.Add(time.Second)
		return at
	}
}

func TestFileLogFormat(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	f.now = clock()
	r1 := mustReserve(t, f, lv2, 250)
	r2 := mustReserve(t, f, lv2, 100)
	r3 := mustReserve(t, f, []Level{{"root", 1000}, {"root", 900}}, 0) // a free call
	r4 := mustReserve(t, f, lv2, 10)
	for _, err := range []error{f.Commit(r1, 200), f.Release(r2), f.Commit(r3, 0), f.Commit(r4, 10)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	r5 := mustReserve(t, f, lv2, 7) // open at the rewrite
	want := `{"op":"reserve","id":1,"delta":250,"keys":["root","root/a"],"limits":[1000,500],"at":1767225600000}
{"op":"reserve","id":2,"delta":100,"keys":["root","root/a"],"limits":[1000,500],"at":1767225601000}
{"op":"reserve","id":3,"delta":0,"keys":["root"],"limits":[900],"at":1767225602000}
{"op":"reserve","id":4,"delta":10,"keys":["root","root/a"],"limits":[1000,500],"at":1767225603000}
{"op":"commit","id":1,"delta":-50,"keys":["root","root/a"]}
{"op":"release","id":2,"delta":-100,"keys":["root","root/a"]}
{"op":"commit","id":4,"delta":0,"keys":["root","root/a"]}
{"op":"reserve","id":5,"delta":7,"keys":["root","root/a"],"limits":[1000,500],"at":1767225604000}
`
	if got := readFile(t, path); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	// A rewrite while the store is open keeps the open reservation apart.
	f.mu.Lock()
	f.compact()
	f.mu.Unlock()
	want = `{"op":"total","delta":210,"keys":["root"],"limits":[1000],"calls":5,"at":1767225604000}
{"op":"total","delta":210,"keys":["root/a"],"limits":[500],"calls":4,"at":1767225604000}
{"op":"reserve","id":5,"delta":7,"keys":["root","root/a"]}
`
	if got := readFile(t, path); got != want {
		t.Errorf("log after a rewrite:\n%s\nwant:\n%s", got, want)
	}
	if err := f.Commit(r5, 5); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = openFile(t, path) // compacts
	want = `{"op":"total","delta":215,"keys":["root"],"limits":[1000],"calls":5,"at":1767225604000}
{"op":"total","delta":215,"keys":["root/a"],"limits":[500],"calls":4,"at":1767225604000}
`
	if got := readFile(t, path); got != want {
		t.Errorf("log after reopening:\n%s\nwant:\n%s", got, want)
	}
	wantSpent(t, f, map[string]int64{"root": 215, "root/a": 215})
}

// A store written before calls were recorded opens, and its rewrite adds
// no record it does not have.
func TestFileOldLog(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	writeFile(t, path, `{"op":"total","delta":100,"keys":["root"]}
{"op":"reserve","id":1,"delta":30,"keys":["root","root/a"]}
{"op":"commit","id":1,"delta":-10,"keys":["root","root/a"]}
{"op":"reserve","id":2,"delta":5,"keys":["root"]}
`)
	f := openFile(t, path)
	wantSpent(t, f, map[string]int64{"root": 125, "root/a": 20})
	want := `{"op":"total","delta":125,"keys":["root"]}
{"op":"total","delta":20,"keys":["root/a"]}
`
	if got := readFile(t, path); got != want {
		t.Errorf("log after opening:\n%s\nwant:\n%s", got, want)
	}
	f.now = clock()
	mustReserve(t, f, []Level{{"root", 1000}}, 0)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	openFile(t, path)
	want = `{"op":"total","delta":125,"keys":["root"],"limits":[1000],"calls":1,"at":1767225600000}
{"op":"total","delta":20,"keys":["root/a"]}
`
	if got := readFile(t, path); got != want {
		t.Errorf("log after a call and a restart:\n%s\nwant:\n%s", got, want)
	}
}

// Free calls are recorded, one line each, but never synced, and their end
// writes nothing; a commit of the reserved cost is written, not synced.
func TestFileFreeCallsAreNotSynced(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	syncs := 0
	f.syncLog = func(l *os.File) error { syncs++; return l.Sync() }
	spend(t, f, 10, "root") // something in the log
	before, beforeSyncs := readFile(t, path), syncs
	for range 10 {
		r := mustReserve(t, f, lv2, 0)
		if err := f.Commit(r, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Release(mustReserve(t, f, lv2, 0)); err != nil {
			t.Fatal(err)
		}
		r = mustReserve(t, f, lv2, 5)
		if err := f.Commit(r, 5); err != nil { // equal: the reservation line holds the spend
			t.Fatal(err)
		}
	}
	if got := readFile(t, path); strings.Count(got, "\n") != strings.Count(before, "\n")+40 {
		t.Errorf("log grew by other than the thirty reservations and ten commits:\n%s", got)
	}
	if syncs-beforeSyncs != 10 {
		t.Errorf("%d syncs for ten reservations with a cost and twenty free ones", syncs-beforeSyncs)
	}
	f.Close()
	f = openFile(t, path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.l.calls["root/a"]; c.calls != 30 || c.limit != 500 {
		t.Errorf("after a restart root/a has the record %+v, want 30 calls and a limit of 500", c)
	}
}

func TestFileRestart(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	for range 4 {
		r := mustReserve(t, f, lv2, 100)
		if err := f.Commit(r, 100); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = openFile(t, path)
	wantSpent(t, f, map[string]int64{"root": 400, "root/a": 400})
	mustReserve(t, f, lv2, 100)
	if _, err := f.Reserve(lv2, 1); !isExceeded(err) {
		t.Errorf("Reserve past the child's limit after a restart: %v", err)
	}
}

// A process that dies after Reserve returned (the call may have been
// forwarded) and before Commit: the held cost counts as spent.
func TestFileCrashAfterReserve(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	spend(t, f, 100, "root", "root/a")
	mustReserve(t, f, lv2, 300)
	r := mustReserve(t, f, lv2, 50)
	if err := f.Release(r); err != nil {
		t.Fatal(err)
	}
	crash(t, f)
	f = openFile(t, path)
	wantSpent(t, f, map[string]int64{"root": 400, "root/a": 400})
	if _, err := f.Reserve(lv2, 101); !isExceeded(err) {
		t.Errorf("Reserve: %v", err)
	}
}

// A crash during a write leaves a last line without its newline; its
// Reserve never returned, so it is dropped, and the rewrite removes it.
func TestFileTornLastLine(t *testing.T) {
	const good = `{"op":"total","delta":100,"keys":["root"]}
{"op":"reserve","id":1,"delta":30,"keys":["root","root/a"]}
`
	tests := []struct{ name, tail string }{
		{"half a line", `{"op":"reserve","id":2,"del`},
		{"a line without its newline", `{"op":"reserve","id":2,"delta":30,"keys":["root","root/a"]}`},
		{"one byte", `{`},
		{"zeros after a crash", "\x00\x00\x00\x00"},
		{"garbage", "\xff\xfe not json"},
		{"nothing torn", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), "spend.log")
			writeFile(t, path, good+tt.tail)
			f := openFile(t, path)
			wantSpent(t, f, map[string]int64{"root": 130, "root/a": 30})
			want := `{"op":"total","delta":130,"keys":["root"]}
{"op":"total","delta":30,"keys":["root/a"]}
`
			if got := readFile(t, path); got != want {
				t.Errorf("log after opening:\n%q\nwant:\n%q", got, want)
			}
			mustReserve(t, f, lv2, 1) // appends after a clean end
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			wantSpent(t, openFile(t, path), map[string]int64{"root": 131, "root/a": 31})
		})
	}
}

func TestFileCorrupt(t *testing.T) {
	const first = `{"op":"total","delta":100,"keys":["root"]}` + "\n"
	const last = `{"op":"reserve","id":1,"delta":30,"keys":["root"]}` + "\n"
	tests := []struct{ name, line, want string }{
		{"not JSON", `hello`, "line 2: invalid character"},
		{"empty line", ``, "line 2: empty line"},
		{"unknown member", `{"op":"total","delta":1,"keys":["a"],"x":1}`, `line 2: unknown member "x"`},
		{"recased member", `{"Op":"total","delta":1,"keys":["a"]}`, `line 2: unknown member "Op"`},
		{"duplicate member", `{"op":"total","delta":1,"delta":2,"keys":["a"]}`, `line 2: duplicate member "delta"`},
		{"unknown op", `{"op":"refund","id":1,"delta":1,"keys":["a"]}`, `line 2: unknown op "refund"`},
		{"float delta", `{"op":"reserve","id":1,"delta":1.5,"keys":["a"]}`, "line 2: json: cannot unmarshal number 1.5"},
		{"release below zero", `{"op":"release","id":9,"delta":-101,"keys":["root"]}`, `line 2: the spend of "root" would fall below zero`},
		{"reserve without id", `{"op":"reserve","delta":1,"keys":["a"]}`, "line 2: a reserve needs a reservation id"},
		{"negative reserve", `{"op":"reserve","id":1,"delta":-1,"keys":["a"]}`, "line 2: a reserve cannot have a delta of -1"},
		{"duplicate key", `{"op":"reserve","id":1,"delta":1,"keys":["a","a"]}`, `line 2: key "a" appears twice`},
		{"no keys", `{"op":"reserve","id":1,"delta":1,"keys":[]}`, "line 2: 0 keys"},
		{"invalid UTF-8", "{\"op\":\"reserve\",\"id\":1,\"delta\":1,\"keys\":[\"\xff\"]}", "line 2: invalid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), "spend.log")
			data := first + tt.line + "\n" + last
			writeFile(t, path, data)
			for range 2 { // the failed open released the lock
				_, err := OpenFile(path)
				if err == nil {
					t.Fatal("OpenFile succeeded")
				}
				if msg := err.Error(); !strings.Contains(msg, "spend store "+path+" is corrupt at "+tt.want) {
					t.Errorf("error %q, want it to name the file and contain %q", msg, tt.want)
				}
			}
			if got := readFile(t, path); got != data {
				t.Error("a corrupt store was changed")
			}
		})
	}
}

func TestFileCompaction(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	f.compactAfter = 10
	want := map[string]int64{}
	open := mustReserve(t, f, []Level{{"held", 100}}, 40) // open across rewrites
	want["held"] = 40
	for i := range 95 {
		key := fmt.Sprint("root/", i%3)
		r := mustReserve(t, f, []Level{{"root", 1 << 20}, {key, 1 << 20}}, 10)
		if err := f.Commit(r, int64(i)); err != nil {
			t.Fatal(err)
		}
		want["root"] += int64(i)
		want[key] += int64(i)
		// A rewrite writes a line per key and one for the open reservation.
		if lines := strings.Count(readFile(t, path), "\n"); lines > 10+len(want)+1 {
			t.Fatalf("log of %d lines after %d reservations: not compacted", lines, i+1)
		}
	}
	wantSpent(t, f, want)
	if err := f.Release(open); err != nil {
		t.Fatal(err)
	}
	want["held"] = 0
	wantSpent(t, f, want)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wantSpent(t, openFile(t, path), want)
}

// Rewrites happen while other goroutines reserve, commit and release.
func TestFileConcurrentCompaction(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	f.compactAfter = 7
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	for g := range 32 {
		wg.Go(func() {
			for i := range 20 {
				r, err := f.Reserve([]Level{{"root", 1 << 40}, {fmt.Sprint("g", g), 1 << 40}}, 9)
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					err = f.Release(r)
				} else {
					err = f.Commit(r, int64(i))
					mu.Lock()
					total += int64(i)
					mu.Unlock()
				}
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	wantSpent(t, f, map[string]int64{"root": total})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wantSpent(t, openFile(t, path), map[string]int64{"root": total, "g1": 100})
}

func TestFileInUse(t *testing.T) {
	dir := tempDir(t)
	path := filepath.Join(dir, "spend.log")
	f := openFile(t, path)
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(path, link); err != nil {
		t.Log(err)
		link = path
	}
	for _, p := range []string{path, link} {
		_, err := OpenFile(p)
		if !errors.Is(err, ErrInUse) {
			t.Fatalf("second OpenFile(%s): %v, want ErrInUse", p, err)
		}
		if want := "spend store " + path + " is in use by another delegateos process"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to contain %q", err, want)
		}
	}
	spend(t, f, 10, "root")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g := openFile(t, link)
	wantSpent(t, g, map[string]int64{"root": 10})
	if link != path {
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the rewrite replaced the symbolic link (%v)", err)
		}
	}
}

const helperStoreEnv = "BUDGET_TEST_STORE"

// TestFileHelperProcess is the other process of TestFileAcrossProcesses:
// it opens the store, reserves, says so, and waits to be killed.
func TestFileHelperProcess(t *testing.T) {
	path := os.Getenv(helperStoreEnv)
	if path == "" {
		t.Skip("helper process for TestFileAcrossProcesses")
	}
	f, err := OpenFile(path)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	if _, err := f.Reserve(lv2, 300); err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("reserved")
	select {} // until killed
}

// Another process holding the store keeps this one out; when it is killed
// without closing the store, the lock is gone and its reservation counts.
func TestFileAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	path := filepath.Join(tempDir(t), "spend.log")
	cmd := exec.Command(exe, "-test.run=^TestFileHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperStoreEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "reserved\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	if _, err := OpenFile(path); !errors.Is(err, ErrInUse) {
		t.Fatalf("OpenFile while another process holds the store: %v, want ErrInUse", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	f := openFile(t, path)
	wantSpent(t, f, map[string]int64{"root": 300, "root/a": 300})
}

func TestFileClosed(t *testing.T) {
	f := openFile(t, filepath.Join(tempDir(t), "spend.log"))
	r := mustReserve(t, f, lv2, 10)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for name, err := range map[string]error{
		"Reserve": func() error { _, err := f.Reserve(lv2, 0); return err }(),
		"Commit":  f.Commit(r, 10),
		"Release": f.Release(r),
	} {
		if err == nil || !strings.Contains(err.Error(), "is closed") {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	wantSpent(t, f, map[string]int64{"root": 10})
}

// A reservation made before a restart cannot be ended after it: its hold
// has become spend.
func TestFileReservationFromBeforeRestart(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	r := mustReserve(t, f, lv2, 10)
	f.Close()
	f = openFile(t, path)
	if err := f.Release(r); err == nil || !strings.Contains(err.Error(), "another store") {
		t.Errorf("Release: %v", err)
	}
	wantSpent(t, f, map[string]int64{"root": 10})
}

func TestFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	dir := tempDir(t)
	path := filepath.Join(dir, "new.log")
	openFile(t, path).Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new store: %v, %v; want 0600", fi.Mode(), err)
	}
	path = filepath.Join(dir, "old.log")
	writeFile(t, path, "")
	os.Chmod(path, 0o640)
	f := openFile(t, path)
	spend(t, f, 1, "a")
	f.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("existing store: %v, %v; want its 0640 kept", fi.Mode(), err)
	}
}

func TestOpenFileRefuses(t *testing.T) {
	dir := tempDir(t)
	tests := []struct{ name, path, want string }{
		{"a directory", dir, "is not a regular file"},
		{"no such directory", filepath.Join(dir, "missing", "spend.log"), "lock: open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := OpenFile(tt.path)
			if err == nil || !strings.Contains(err.Error(), "spend store "+tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error naming the store and containing %q", err, tt.want)
			}
		})
	}
}

// failWrites points the log of f at /dev/full, where every write fails
// with ENOSPC, until the store rewrites (and so reopens) its log.
func failWrites(t *testing.T, f *File) {
	t.Helper()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	f.mu.Lock()
	f.log.Close()
	f.log = full
	f.mu.Unlock()
}

// A full disk refuses the reservation with an error a person can act on;
// once the store can be written again it is rewritten and works.
func TestFileFullDisk(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	spend(t, f, 100, "root", "root/a")
	failWrites(t, f)
	_, err := f.Reserve(lv2, 10)
	if err == nil {
		t.Fatal("Reserve succeeded on a full disk")
	}
	for _, want := range []string{"spend store " + path, "cannot record the reservation, so the call is refused", "no space left on device", "the disk is full"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if errors.Is(err, ErrExceeded) {
		t.Error("a write failure is not ErrExceeded")
	}
	wantSpent(t, f, map[string]int64{"root": 100})
	wantCalls(t, f, "root/a", 1) // the refused call is not counted
	mustReserve(t, f, lv2, 0)    // free calls need no disk
	wantCalls(t, f, "root/a", 2)
	// The disk has room again: the next reservation rewrites the log.
	mustReserve(t, f, lv2, 10)
	wantSpent(t, f, map[string]int64{"root": 110})
	if f.dirty != nil {
		t.Errorf("still dirty: %v", f.dirty)
	}
	crash(t, f)
	f = openFile(t, path)
	wantSpent(t, f, map[string]int64{"root": 110, "root/a": 110})
	wantCalls(t, f, "root/a", 3)
}

func wantCalls(t *testing.T, f *File, key string, calls int64) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := f.l.calls[key].calls; got != calls {
		t.Errorf("%s has had %d calls, want %d", key, got, calls)
	}
}

// A commit over its reservation that cannot be written still counts in
// the process, and the log is rewritten before the next reservation.
func TestFileCommitWriteFails(t *testing.T) {
	path := filepath.Join(tempDir(t), "spend.log")
	f := openFile(t, path)
	r := mustReserve(t, f, lv2, 10)
	failWrites(t, f)
	err := f.Commit(r, 50)
	if err == nil || !strings.Contains(err.Error(), "cannot record the commit (it counts in this process") {
		t.Fatalf("Commit: %v", err)
	}
	wantSpent(t, f, map[string]int64{"root": 50})
	if err := f.Commit(r, 50); err == nil {
		t.Error("the failed commit left the reservation open")
	}
	mustReserve(t, f, lv2, 5)
	crash(t, f)
	wantSpent(t, openFile(t, path), map[string]int64{"root": 55, "root/a": 55})
}

// While the log cannot be rewritten, reservations with a cost are refused
// (fail closed) and Close reports it; they work again once it can be.
func TestFileRewriteFails(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("renames an open directory")
	}
	dir := filepath.Join(tempDir(t), "store")
	os.Mkdir(dir, 0o700)
	path := filepath.Join(dir, "spend.log")
	f := openFile(t, path)
	failWrites(t, f)
	if _, err := f.Reserve(lv2, 10); err == nil {
		t.Fatal("Reserve succeeded")
	}
	away := dir + ".away"
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := f.Reserve(lv2, 10)
		if err == nil || !strings.Contains(err.Error(), "spend store "+path+": cannot record the reservation") {
			t.Fatalf("Reserve while the log cannot be rewritten: %v", err)
		}
	}
	mustReserve(t, f, lv2, 0)
	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	mustReserve(t, f, lv2, 10)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wantSpent(t, openFile(t, path), map[string]int64{"root": 10})
}

// A relative path names the same store after the process changes directory.
func TestFileRelativePath(t *testing.T) {
	dir := tempDir(t)
	t.Chdir(dir)
	f := openFile(t, "spend.log")
	t.Chdir(t.TempDir())
	spend(t, f, 5, "a")
	f.Close()
	wantSpent(t, openFile(t, filepath.Join(dir, "spend.log")), map[string]int64{"a": 5})
}
