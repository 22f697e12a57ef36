package chain

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// Two stores on one log, as two proxies sharing a workspace: what one
// records, the other's next read returns.
func TestFileSharedLogSeenAtNextRead(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "chain.log")
	a, b := mustOpen(t, path), mustOpen(t, path)
	mustInsert(t, a, f.root, f.a, f.b)
	status := func() Status {
		t.Helper()
		d, err := b.Get(f.b.ID)
		if err != nil {
			t.Fatal(err)
		}
		return d.Status
	}
	for range 3 {
		if st := status(); st != StatusActive {
			t.Fatalf("before: %s", st)
		}
	}
	if err := a.Complete(f.b.ID, "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if st := status(); st != StatusCompleted {
		t.Fatalf("the read after the other store completed it: %s", st)
	}
	if _, err := a.Revoke(f.a.ID, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if d, err := b.Get(f.a.ID); err != nil || d.Status != StatusRevoked {
		t.Fatalf("the read after the other store revoked it: %v %v", d.Status, err)
	}
}

// A read of a log that has not changed takes no lock: it must not wait
// for a writer that holds it. A read of a log that has grown waits, and
// then returns what was appended.
func TestFileUnchangedReadTakesNoLock(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "chain.log")
	a, b := mustOpen(t, path), mustOpen(t, path)
	mustInsert(t, a, f.root)
	if _, err := b.Get(f.root.ID); err != nil {
		t.Fatal(err)
	}
	unlock, err := fsutil.Lock(path+".lock", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Get(f.root.ID)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		unlock()
		t.Fatal("a read of an unchanged log waited for the lock")
	}
	unlock()

	mustInsert(t, a, f.a)
	unlock, err = fsutil.Lock(path+".lock", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := b.Get(f.a.ID)
		done <- err
	}()
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("the read after the log grew: %v", err)
	}
}

// A log replaced by a copy of itself, of the same size, is refused: it is
// not the file that was replayed.
func TestFileReplacedLogRefusedAtNextRead(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "chain.log")
	s := mustOpen(t, path)
	mustInsert(t, s, f.root)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(f.root.ID); err == nil {
		t.Fatal("Get from a replaced log: no error")
	}
}

// Get on an open File whose log has not changed: one stat, no lock.
func BenchmarkFileGetUnchanged(b *testing.B) {
	root, ds := benchChildren(b, 99)
	s := mustOpen(b, filepath.Join(b.TempDir(), "chain.log"))
	mustInsert(b, s, root)
	mustInsert(b, s, ds...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(root.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// Get after another store on the same log appended one line (a child
// delegation, not timed): lock, read and replay that line.
func BenchmarkFileGetAfterAppend(b *testing.B) {
	root, ds := benchChildren(b, b.N)
	path := filepath.Join(b.TempDir(), "chain.log")
	w, r := mustOpen(b, path), mustOpen(b, path)
	mustInsert(b, w, root)
	if _, err := r.Get(root.ID); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		mustInsert(b, w, ds[i])
		b.StartTimer()
		if _, err := r.Get(ds[i].ID); err != nil {
			b.Fatal(err)
		}
	}
}
