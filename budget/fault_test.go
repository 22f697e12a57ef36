//go:build unix

package budget

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

// A counts epoch cut while mapped is an error at its next load or bump,
// not a SIGBUS; the proxy finds it cut, and opening it again puts a whole
// counter (another file) in its place.
func TestEpochCutWhileMappedIsAnError(t *testing.T) {
	dir := t.TempDir()
	e, err := openEpoch(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	if _, err := e.bump(); err != nil {
		t.Fatal(err)
	}
	if e.replaced() {
		t.Fatal("a whole epoch taken for replaced")
	}
	if err := os.Truncate(e.path, 0); err != nil {
		t.Fatal(err)
	}
	var cut *cutError
	if _, err := e.load(); !errors.As(err, &cut) || cut.path != e.path {
		t.Fatalf("load of a cut epoch: %v; want a cutError naming it", err)
	}
	if _, err := e.bump(); !errors.As(err, &cut) {
		t.Fatalf("bump of a cut epoch: %v; want a cutError", err)
	}
	if !e.replaced() {
		t.Fatal("a cut epoch not found cut")
	}
	n, err := openEpoch(dir)
	if err != nil {
		t.Fatalf("opening a cut epoch again: %v; want a whole one in its place", err)
	}
	defer n.close()
	if n.ino == e.ino {
		t.Fatal("the cut file mapped again")
	}
	if _, err := n.bump(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, epochFile)); err != nil || fi.Size() != 4096 {
		t.Fatalf("the epoch made again: %v %v", fi, err)
	}
	// A hard link to another file (`ln -f FILE counts-epoch`): replaced,
	// not bumped into.
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("{\"a file\":\"of the directory\"}"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(n.path)
	if err := os.Link(other, n.path); err != nil {
		t.Fatal(err)
	}
	l, err := openEpoch(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.bump()
	l.close()
	if b, _ := os.ReadFile(other); string(b) != "{\"a file\":\"of the directory\"}" {
		t.Fatalf("a file linked as the epoch was written: %q", b)
	}
	// Not a regular file: refused, naming it.
	os.Remove(n.path)
	if err := os.Mkdir(n.path, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := openEpoch(dir); err == nil {
		t.Fatal("a directory mapped as the epoch")
	}
}

// A live record cut while mapped is an error at its next raise, not a
// SIGBUS; one cut, renamed away, replaced by another file or rewritten
// in place with an older copy is found not whole.
func TestLiveRecordSpoiledIsFound(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(l *liveRecord, older []byte) error
		fault bool
	}{
		{"cut", func(l *liveRecord, _ []byte) error { return os.Truncate(l.path, 0) }, true},
		{"cut short", func(l *liveRecord, _ []byte) error { return os.Truncate(l.path, 100) }, false},
		{"renamed away", func(l *liveRecord, _ []byte) error { return os.Rename(l.path, l.path+".aside") }, false},
		{"replaced", func(l *liveRecord, older []byte) error {
			if err := os.WriteFile(l.path+".x", older, 0o600); err != nil {
				return err
			}
			return os.Rename(l.path+".x", l.path)
		}, false},
		{"rewritten in place", func(l *liveRecord, older []byte) error {
			f, err := os.OpenFile(l.path, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt(older, 0)
			return err
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.live")
			l, err := openLive(path, path+".new", "ident", 7, "machine", "inst")
			if err != nil {
				t.Fatal(err)
			}
			defer l.close(false)
			if err := l.raise("root/a", 5); err != nil {
				t.Fatal(err)
			}
			older, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.raise("root/a", 9); err != nil {
				t.Fatal(err)
			}
			if !l.whole() {
				t.Fatal("a whole record found spoiled")
			}
			if err := c.spoil(l, older); err != nil {
				t.Fatal(err)
			}
			if l.whole() {
				t.Fatalf("a record %s found whole", c.name)
			}
			var cut *cutError
			if err := l.raise("root/b", 3); c.fault && !errors.As(err, &cut) {
				t.Fatalf("raise into a record %s: %v; want a cutError", c.name, err)
			}
			if c.name == "cut short" {
				// Growing it is refused too: it would leave a hole
				// where its header was.
				for i := 0; i < liveSize/16; i++ {
					if err := l.raise("root/grow"+strconv.Itoa(i), 1); err != nil {
						if !errors.As(err, &cut) {
							t.Fatalf("growing a record cut short: %v; want a cutError", err)
						}
						return
					}
				}
				t.Fatal("a record cut short grown")
			}
		})
	}
}

// BenchmarkEpochLoad is what a reservation pays to check the counts
// epoch: a load from the mapped page, under panic-on-fault (guardFault).
func BenchmarkEpochLoad(b *testing.B) {
	e, err := openEpoch(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer e.close()
	for b.Loop() {
		if _, err := e.load(); err != nil {
			b.Fatal(err)
		}
	}
}

// A proxy's reservations go on while its mapped files are spoiled under
// them, again and again (the counts epoch cut, removed, replaced; its
// live record cut, renamed away): no fault escapes, no call is refused
// (each time a whole file can be mapped again), and after each repair
// (checkMaps, which the proxy also runs every mapCheckEvery) the proxy
// maps the state directory's epoch and a whole record of its own that
// holds its count.
func TestRedisMappedFilesSpoiledUnderCalls(t *testing.T) {
	dir := t.TempDir()
	s := openRedisIn(t, redistest.Start(t).URL(), dir)
	levels := []Level{{"ISSUER/del_root", 1 << 40}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := s.Reserve(levels, 1)
				if err != nil {
					t.Error(err)
					return
				}
				s.Commit(r, 1)
			}
		}()
	}
	epoch := filepath.Join(dir, epochFile)
	for i := range 30 {
		s.mu.Lock()
		rec := s.live.path
		s.mu.Unlock()
		var err error
		switch i % 5 {
		case 0:
			err = os.Truncate(epoch, 0)
		case 1:
			err = os.Remove(epoch)
		case 2:
			if err = os.WriteFile(epoch+".x", make([]byte, 4096), 0o600); err == nil {
				err = os.Rename(epoch+".x", epoch)
			}
		case 3:
			err = os.Truncate(rec, 0)
		case 4:
			err = os.Rename(rec, rec+".aside")
		}
		if err != nil {
			t.Fatal(err)
		}
		s.checkMaps()
		s.mu.Lock()
		e, l, want := s.epoch, s.live, s.seen["ISSUER/del_root"]
		replaced, whole := e.replaced(), l.whole()
		s.mu.Unlock()
		if replaced || !whole {
			t.Fatalf("after spoil %d: epoch replaced %v, live record whole %v", i, replaced, whole)
		}
		b, err := os.ReadFile(l.path)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := parseLive(b); err != nil || st == nil || st.Seen["ISSUER/del_root"] < want {
			t.Fatalf("after spoil %d: the live record holds %+v (%v); want a count of at least %d", i, st, err, want)
		}
	}
	close(stop)
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// A mapped file cut that cannot be made whole again refuses the calls
// store_unavailable, naming the file, without holding their cost, until
// it can: then the proxy takes calls again by itself.
func TestRedisMappedFileCutRefusedUntilRepaired(t *testing.T) {
	dir := t.TempDir()
	s := openRedisIn(t, redistest.Start(t).URL(), dir)
	levels := []Level{{"ISSUER/del_root", 1000}}
	mustReserve(t, s, levels, 10)
	refused := func(what, path string) {
		t.Helper()
		before := s.Spent("ISSUER/del_root")
		if _, err := s.Reserve(levels, 10); !errors.Is(err, redisconn.ErrUnavailable) || !strings.Contains(err.Error(), path) {
			t.Fatalf("a call after %s: %v; want store_unavailable naming %s", what, err, path)
		}
		if got := s.Spent("ISSUER/del_root"); got != before {
			t.Fatalf("after the refused call after %s the spend is %d; want %d (nothing held)", what, got, before)
		}
	}

	// The live record: no new one can be made under the next names
	// (the proxy's check, every mapCheckEvery, may try some too).
	s.mu.Lock()
	rec, seq, prefix := s.live.path, s.liveSeq, s.newPrefix(s.ident.ID)+s.nonce+"."
	s.mu.Unlock()
	var blocked []string
	for n := seq + 1; n <= seq+50; n++ {
		for i := range 5 {
			b := prefix + strconv.Itoa(n) + "." + strconv.Itoa(i)
			if err := os.Mkdir(b, 0o700); err != nil {
				t.Fatal(err)
			}
			blocked = append(blocked, b)
		}
	}
	if err := os.Truncate(rec, 0); err != nil {
		t.Fatal(err)
	}
	refused("the live record was cut", rec)
	refused("the live record was cut, again", rec)
	for _, b := range blocked {
		os.Remove(b)
	}
	mustReserve(t, s, levels, 10) // a new record

	// The counts epoch: its lock is not a file.
	epoch := filepath.Join(dir, epochFile)
	os.Remove(epoch + ".lock")
	if err := os.Mkdir(epoch+".lock", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(epoch, 0); err != nil {
		t.Fatal(err)
	}
	refused("the counts epoch was cut", epoch)
	refused("the counts epoch was cut, again", epoch)
	if err := os.Remove(epoch + ".lock"); err != nil {
		t.Fatal(err)
	}
	mustReserve(t, s, levels, 10)
	if fi, err := os.Stat(epoch); err != nil || fi.Size() < 8 {
		t.Fatalf("the counts epoch after the repair: %v %v", fi, err)
	}
}
