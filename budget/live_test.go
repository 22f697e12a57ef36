//go:build unix

package budget

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

// A live record reads back as the largest count raised at each key, past
// the size it was made with, and one whose header was never whole holds
// nothing.
func TestLiveRecordReadsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.live")
	l, err := openLive(path, path+".new", "ident", 7, "machine", "inst")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for i := range 2000 { // past liveSize: the file grows
		k := "root/" + strings.Repeat("k", i%50) + strconv.Itoa(i)
		l.raise(k, int64(i+1))
		l.raise(k, int64(i)) // never lowered
		want[k] = int64(i + 1)
	}
	l.raise("root/k0", 5000)
	want["root/k0"] = 5000
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l.close(true)
	if len(b) <= liveSize {
		t.Fatalf("the record did not grow: %d bytes", len(b))
	}
	st, err := parseLive(b)
	if err != nil || st == nil || st.ID != "ident" || st.Gen != 7 || st.Machine != "machine" || len(st.Seen) != len(want) {
		t.Fatalf("read back: %+v %v", st, err)
	}
	for k, n := range want {
		if st.Seen[k] != n || st.MSeen[k] != n || st.MInst[k] != "inst" {
			t.Fatalf("%s: %d, %d; want %d", k, st.Seen[k], st.MSeen[k], n)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("close(true) left the file: %v", err)
	}
	if st, err := parseLive(make([]byte, liveSize)); st != nil || err != nil {
		t.Fatalf("a record without its header: %+v %v; want nothing", st, err)
	}
	if _, err := parseLive([]byte("garbage, not a record at all")); err == nil {
		t.Fatal("garbage read as a record")
	}
}

// BenchmarkLiveRaise is the cost a reservation adds to record its count
// in the live record (a store into a mapped page, no system call).
func BenchmarkLiveRaise(b *testing.B) {
	l, err := openLive(filepath.Join(b.TempDir(), "r.live"), filepath.Join(b.TempDir(), "r.new"), "ident", 1, "machine", "inst")
	if err != nil {
		b.Fatal(err)
	}
	defer l.close(true)
	for i := 0; b.Loop(); i++ {
		l.raise("did:key:z6MkroOt/16:del_0123456789ab", int64(i+1))
	}
}

// BenchmarkPwriteRaise is the alternative measured against it: a pwrite
// of the count per reservation (a system call, no fsync).
func BenchmarkPwriteRaise(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "r.pwrite"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var buf [8]byte
	for i := 0; b.Loop(); i++ {
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf[:], 256); err != nil {
			b.Fatal(err)
		}
	}
}

// A proxy killed within a second of its last calls left them in its live
// record only (its counts file says 3, the record 5); the store then lost
// its identity and an operator rebuilt it from logs that hold 4 calls: a
// proxy restarted on the machine carries the record's counts over to the
// new identity and refuses the rebuild as short.
func TestLiveRecordCarriedToARecoveredIdentity(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	levels := []Level{{"R1/1:a", 1000}}
	s := openRedisIn(t, srv.URL(), dir)
	for range 3 {
		s.Commit(mustReserve(t, s, levels, 1), 1)
	}
	was, machine := s.ident, s.machine
	s.Close()
	l, err := openLive(s.livePrefix(was.ID)+"killed.1", s.newPrefix(was.ID)+"killed.1", was.ID, was.Gen, machine, s.instance)
	if err != nil {
		t.Fatal(err)
	}
	l.raise(levels[0].Key, 5)
	l.close(false) // as a kill leaves it: its lock dropped, the file kept
	srv.FlushAll()
	if _, err := RecoverStore(srv.URL(), StateDir(), []Usage{{Key: levels[0].Key, Committed: 4, Calls: 4}}); err != nil {
		t.Fatal(err)
	}
	s = openRedisIn(t, srv.URL(), dir)
	if _, err := s.Reserve(levels, 1); !errors.Is(err, redisconn.ErrReset) || !strings.Contains(err.Error(), "fewer than the 5 this proxy saw") {
		t.Fatalf("a machine whose killed proxy saw 5 calls, after a rebuild of 4 on a store that lost its identity: %v, want ErrReset", err)
	}
	if m, _ := filepath.Glob(s.livePrefix(was.ID) + "*"); len(m) != 0 {
		t.Errorf("the killed proxy's record is still there once carried over: %v", m)
	}
}

// A proxy of the machine killed while another runs: the running proxy's
// next write of its counts folds the dead record (into what it checks,
// and the counts file), and removes it; a record being made whose proxy
// is gone (under the temporary name) is removed, one whose lock is held
// is left.
func TestLiveRecordFoldedByARunningProxy(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	levels := []Level{{"R1/1:a", 1000}}
	s := openRedisIn(t, srv.URL(), dir)
	s.Commit(mustReserve(t, s, levels, 1), 1)
	l, err := openLive(s.livePrefix(s.ident.ID)+"killed.1", s.newPrefix(s.ident.ID)+"killed.1", s.ident.ID, s.ident.Gen, s.machine, s.instance)
	if err != nil {
		t.Fatal(err)
	}
	l.raise(levels[0].Key, 7)
	l.close(false) // as a kill leaves it
	stale := s.newPrefix(s.ident.ID) + "stale.1.0"
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held, err := openLocked(s.newPrefix(s.ident.ID)+"held.1.0", true)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	s.saveSeen()
	s.mu.Lock()
	seen, mseen := s.seen[levels[0].Key], s.mseen[levels[0].Key]
	s.mu.Unlock()
	if seen != 7 || mseen != 7 {
		t.Errorf("after the running proxy's write: seen %d, machine %d; want 7 (the killed proxy's record)", seen, mseen)
	}
	st, err := s.readSeenFile(s.ident.ID)
	if err != nil || st.Seen[levels[0].Key] != 7 {
		t.Errorf("the counts file: %+v %v; want 7", st, err)
	}
	if _, err := os.Stat(l.path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the folded record is still there: %v", err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a record being made whose proxy is gone is still there: %v", err)
	}
	if _, err := os.Stat(held.Name()); err != nil {
		t.Errorf("a record being made by a running proxy was removed: %v", err)
	}
	if _, err := s.Reserve(levels, 1); err == nil || !errors.Is(err, redisconn.ErrReset) {
		t.Errorf("the store counts 1 call, the machine saw 7: %v; want ErrReset", err)
	}
}

// A live record that must grow for a new tree's count and cannot (the
// state directory's filesystem full; here its file opened read-only, so
// the write of its new blocks fails) refuses the call store_unavailable,
// naming the state directory and the cause, with nothing left charged;
// forwarded, its count was held only in memory until the next counts
// write (red team 9). Once the record can grow, calls go on.
func TestLiveRecordThatCannotGrowRefusesTheCall(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	s := openRedisIn(t, srv.URL(), dir)
	s.Commit(mustReserve(t, s, []Level{{"R1/1:a", 1000}}, 1), 1)
	key := "R2/1:b"
	s.mu.Lock()
	l := s.live
	if l == nil {
		s.mu.Unlock()
		t.Fatal("no live record")
	}
	need := 16 + (len(key)+7)&^7
	for i := 0; l.next+need+16 <= len(l.mem); i++ { // full: the next new key grows it
		if err := l.raise(fmt.Sprintf("f%05d", i), 1); err != nil { // as long as key: no growth
			s.mu.Unlock()
			t.Fatal(err)
		}
	}
	rw := l.f
	ro, err := os.Open(l.path)
	if err != nil {
		s.mu.Unlock()
		t.Fatal(err)
	}
	l.f = ro
	s.mu.Unlock()
	_, err = s.Reserve([]Level{{key, 1000}}, 1)
	if !errors.Is(err, redisconn.ErrUnavailable) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "bad file descriptor") {
		t.Fatalf("a new tree's count, the live record unable to grow: %v; want store_unavailable naming %s and the cause", err, dir)
	}
	wantSpent(t, s, map[string]int64{key: 0, "R1/1:a": 1})
	s.mu.Lock()
	l.f = rw
	s.mu.Unlock()
	ro.Close()
	s.Commit(mustReserve(t, s, []Level{{key, 1000}}, 1), 1)
	wantSpent(t, s, map[string]int64{key: 1})
	b, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := parseLive(b); err != nil || st == nil || st.Seen[key] < 1 {
		t.Fatalf("the live record once grown: %v; want %s counted", err, key)
	}
}

// A counts file's lock file deleted while a proxy holds it (an operator's
// rm STATE_DIR/*.lock): a second locker gets a new lock file at once, and
// two writes of the counts file could then interleave, one dropping the
// other's raises. The first proxy finds its lock is no longer the file at
// the path (fstat against lstat) and writes again under the new one; a
// lock taken on a deleted file is taken again (red team 9).
func TestCountsLockDeletedWhileHeldIsTakenAgain(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	s := openRedisIn(t, srv.URL(), dir)
	s.Commit(mustReserve(t, s, []Level{{"R1/1:a", 1000}}, 1), 1)
	var calls atomic.Int32
	hook := func(path string) {
		if calls.Add(1) > 1 {
			return
		}
		if err := os.Remove(path); err != nil {
			t.Error(err)
			return
		}
		other, err := lockWait(path) // another proxy: not kept waiting
		if err != nil {
			t.Error(err)
			return
		}
		other.Close()
	}
	lockTaken.Store(&hook)
	t.Cleanup(func() { lockTaken.Store(nil) })
	if err := s.storeSeen(true); err != nil {
		t.Fatal(err)
	}
	lockTaken.Store(nil)
	if calls.Load() < 2 { // (a background write of the counts may take it too)
		t.Errorf("the counts written under a lock file deleted while held, %d lock taken; want the write made again under the new lock file", calls.Load())
	}
	// A lock taken on a file deleted meanwhile is taken again on the
	// file at the path.
	path := s.seenPath(s.ident.ID) + ".lock"
	held, err := lockWait(path)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *os.File, 1)
	go func() {
		f, err := lockWait(path)
		if err != nil {
			t.Error(err)
		}
		got <- f
	}()
	for !lockWaiting(t, path) {
		runtime.Gosched()
	}
	os.Remove(path)
	held.Close()
	f := <-got
	if f == nil {
		t.Fatal("no lock")
	}
	defer f.Close()
	if !lockHeld(f, path) {
		t.Fatal("a lock taken on a lock file deleted while it waited: not the file at the path")
	}
}

// lockWaiting reports whether a flock request on the file at path waits
// (/proc/locks: a "->" line of its inode).
func lockWaiting(t *testing.T, path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "->") {
			f := strings.Fields(l)
			for _, w := range f {
				if strings.HasSuffix(w, ":"+strconv.FormatUint(ino, 10)) {
					return true
				}
			}
		}
	}
	return false
}
