package chain

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

func openShared(t *testing.T, url string) *Shared {
	t.Helper()
	s, err := OpenShared(mustOpen(t, filepath.Join(t.TempDir(), "delegations.jsonl")), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitStatus waits up to 5 s for s to report id with status want.
func waitStatus(t *testing.T, s *Shared, id string, want Status) {
	t.Helper()
	var st Status
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		var rec bool
		if st, rec, err = s.Status(id); err == nil && rec && st == want {
			return
		}
	}
	t.Fatalf("Status(%s) = %q, %v; want %q", id, st, err, want)
}

// A delegation that ends at one proxy is ended at every proxy sharing the
// set, though only the first has it in its workspace.
func TestSharedEndingsReachTheFleet(t *testing.T) {
	srv := redistest.Start(t)
	f := newFixture(t)
	here, there := openShared(t, srv.URL()), openShared(t, srv.URL())
	mustInsert(t, here, f.root, f.a, f.b)
	if st, rec, err := there.Status(f.a.Key); err != nil || rec {
		t.Fatalf("before: %q %v %v", st, rec, err)
	}
	if err := here.Complete(f.b.Key, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, there, f.b.Key, StatusCompleted)
	if _, err := here.Revoke(f.root.Key, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, there, f.root.Key, StatusRevoked)
	waitStatus(t, there, f.a.Key, StatusRevoked)
	set, err := LoadEnded(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if len(set) != 3 || set[f.b.Key] != StatusCompleted || set[f.a.Key] != StatusRevoked {
		t.Fatalf("LoadEnded = %v", set)
	}
}

// The proxy that ends a delegation holds the ending in its copy at once:
// a FLUSHALL right after the write, before its own PUBLISH came back and
// the entry was read again, left the ending in no running proxy's copy,
// and the set stayed without it until a proxy restarted (seen as a flaky
// TestE2EFaultFlushAllEndedWrittenBack). Now the writer writes it back.
func TestSharedWriterHoldsItsEnding(t *testing.T) {
	srv := redistest.Start(t)
	f := newFixture(t)
	here := openShared(t, srv.URL())
	mustInsert(t, here, f.root, f.a, f.b)
	if err := here.Complete(f.b.Key, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := here.copy.Get(f.b.Key); err != nil || !ok || v != string(StatusCompleted) {
		t.Fatalf("the writer's copy right after Complete: %q %v %v; want it held", v, ok, err)
	}
	srv.FlushAll()
	ctx := context.Background()
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		v, err := srv.Client().HGet(ctx, endedHash, f.b.Key).Result()
		if err == nil && v == string(StatusCompleted) {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the ending after a FLUSHALL right after it was written: %q, %v; want it written back by the proxy that wrote it", v, err)
		}
	}
}

// What the set holds is checked: an entry that is not a delegation ID
// with a terminal status makes the set fail closed.
func TestSharedRefusesBadEntries(t *testing.T) {
	srv := redistest.Start(t)
	srv.Client().HSet(context.Background(), endedHash, delID(9), "active")
	if _, err := OpenShared(NewMemory(), srv.URL()); err == nil {
		t.Fatal("a set holding an active delegation was accepted")
	}
	if _, err := LoadEnded(srv.URL()); err == nil {
		t.Fatal("LoadEnded accepted an active delegation")
	}
}

// A stalled server: Status fails with ErrUnavailable within about a
// second, so the gate denies rather than deciding on a stale set.
func TestSharedStall(t *testing.T) {
	srv := redistest.Start(t)
	s := openShared(t, srv.URL())
	key := newFixture(t).root.Key
	srv.Pause()
	defer srv.Resume()
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, _, err = s.Status(key); err != nil {
			break
		}
	}
	if !errors.Is(err, redisconn.ErrUnavailable) {
		t.Fatalf("Status on a stalled server: %v, want ErrUnavailable", err)
	}
}

// store recover republishes endings by delegation key: an ID entry would
// end every delegation with that ID (a sybil's under the victim's ID
// included). A terminal record with no valid key is refused, not
// republished by ID.
func TestRepublishEndedByKey(t *testing.T) {
	srv := redistest.Start(t)
	f := newFixture(t)
	a, b := f.a, f.b
	a.Status, b.Status = StatusActive, StatusCompleted
	n, err := RepublishEnded(srv.URL(), []Delegation{f.root, a, b})
	if err != nil || n != 1 {
		t.Fatalf("RepublishEnded = %d, %v", n, err)
	}
	fields, err := srv.Client().HKeys(context.Background(), endedHash).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != 1 || fields[0] != b.Key {
		t.Fatalf("set fields = %v, want only the key %s (not ID %s)", fields, b.Key, b.ID)
	}
	keyless := b
	keyless.Key = ""
	if _, err := RepublishEnded(srv.URL(), []Delegation{keyless}); err == nil {
		t.Fatal("a terminal record without a key was republished")
	}
	keyless.Key = b.ID
	if _, err := RepublishEnded(srv.URL(), []Delegation{keyless}); err == nil {
		t.Fatal("a terminal record whose key is an ID was republished")
	}
	if fields, _ := srv.Client().HKeys(context.Background(), endedHash).Result(); len(fields) != 1 {
		t.Fatalf("set fields after refusals = %v", fields)
	}
}
